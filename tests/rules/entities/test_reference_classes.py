"""The reference classes of issue 14, per language: at least ten phrasings of each class in each of
English, Chinese, Korean and Japanese, each with the entity it must resolve to or the reason it
must abstain. Every row runs as a conversation through track_entities then resolve_refs
(tests/support/scenarios.py), so tracking (heredocs after cd, tee, file tools) is tested too."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scenarios import Scenario, run

Step = dict[str, Any]


def sh(command: str, code: int = 0, output: str = "") -> Step:
    return {"shell": command, "exit": code, "output": output}


# ----- what the agent did before the message (cwd, steps, the lead agent's steps) -----

PASSIVE = ("/w/app", [sh("mkdir reports"), sh("python gen.py > out.json"), sh("rm old.log"),
                      sh("pytest -q", output="3 passed")], None)  # fmt: skip
LEAD = {
    "cwd": "/w/api",
    "steps": [
        {"tool": "write_file", "args": {"path": "/w/api/config/settings.toml", "content": "x"}},
        sh("mkdir fixtures"),
        sh("rm -rf legacy/"),
        {"user": "hand the tests to a sub-agent"},
    ],
}
ACTOR = ("/w/api", [sh("touch child_notes.md"), sh("mkdir scratch")], LEAD)
RECENT = ("/w/ml", [sh("echo 'lr=3e-4' >> results.log"), sh("pip install torch"),
                    sh("nvidia-smi", output="A10G")], None)  # fmt: skip
CROWD = ("/w/ml", [sh("touch a.txt"), sh("touch b.txt"), sh("touch c.txt")], None)
HEREDOC = ("/w/proj", [sh("ls deploy"), sh("cd deploy && cat > nginx.conf <<'EOF'\nserver {\n"
                       "  listen 80;\n}\nEOF"), sh("nginx -t")], None)  # fmt: skip
TEE = ("/w/proj", [sh("echo 'vm.max_map_count=1' | sudo tee /etc/app.conf"), sh("sysctl -p")], None)
TOOL = ("/w/proj", [{"tool": "read_file", "args": {"path": "/w/proj/README.md"}},
                    {"tool": "write_file", "args": {"path": "notes/todo.md", "content": "- a"}},
                    {"tool": "write_file", "args": {"path": "/root/x.md", "content": "x"},
                     "ok": False}], None)  # fmt: skip
SUMMARY_MD = {"tool": "write_file", "args": {"path": "summary.md", "content": "# S"}}
NOUNS = ("/w/data", [sh("python export.py > exports/users.csv"), sh("pg_dump shop > shop_dump.sql"),
                     SUMMARY_MD], None)  # fmt: skip
REDIRECT = ("/w/proj", [sh("cd /w/proj/src && printf 'a' > gen.txt"), sh("make")], None)
TWO_WRITES = ("/w/proj", [sh("echo hi | tee a.txt b.txt")], None)
CD_MKDIR = (
    "/w/site",
    [sh("cd src && mkdir components hooks"), sh("ls", output="components hooks")],
    None,
)
CD_TOUCH = ("/w/site", [sh("cd /tmp/out && touch a.txt b.txt")], None)
CD_CHAIN = ("/w/site", [sh("mkdir -p /w/x && cd /w/x && mkdir a b")], None)
CD_ONE = ("/w/site", [sh("cd src && mkdir only"), sh("ls")], None)

REPORTS, OUT, OLD = "/w/app/reports", "/w/app/out.json", "/w/app/old.log"
SETTINGS, FIXTURES, LEGACY = "/w/api/config/settings.toml", "/w/api/fixtures", "/w/api/legacy"
SCRATCH, RESULTS = "/w/api/scratch", "/w/ml/results.log"
NGINX, ETC = "/w/proj/deploy/nginx.conf", "/etc/app.conf"
TODO, GEN = "/w/proj/notes/todo.md", "/w/proj/src/gen.txt"
ONLY = "/w/site/src/only"
CSV, DUMP, SUMMARY = "/w/data/exports/users.csv", "/w/data/shop_dump.sql", "/w/data/summary.md"
AMBIGUOUS, NONE, LOW = "ambiguous", "no_candidate", "low_confidence"

# (class, lang, setup, phrasing, the path it must resolve to, or why it must abstain)
TABLE: list[tuple[str, str, Any, str, str]] = [
    # 1. passive and resultative voice: the actor is left out, the entity is the agent's
    ("passive", "en", PASSIVE, "open the folder that got created", REPORTS),
    ("passive", "en", PASSIVE, "what's in the directory that was made?", REPORTS),
    ("passive", "en", PASSIVE, "show me the file that was generated", OUT),
    ("passive", "en", PASSIVE, "the file that got written by that script, pretty-print it", OUT),
    ("passive", "en", PASSIVE, "restore the file that was deleted", OLD),
    ("passive", "en", PASSIVE, "the newly created folder should be renamed to docs", REPORTS),
    ("passive", "en", PASSIVE, "is the generated file valid?", OUT),
    ("passive", "en", PASSIVE, "the deleted log file, bring it back", OLD),
    ("passive", "en", PASSIVE, "move the folder created earlier into src", REPORTS),
    ("passive", "en", PASSIVE, "the file which has been generated, commit it", OUT),
    ("passive", "en", PASSIVE, "the directory that's been set up needs a README", REPORTS),
    ("passive", "en", PASSIVE, "bring back the folder that got deleted", NONE),
    ("passive", "zh", PASSIVE, "被创建的那个文件夹打开看看", REPORTS),
    ("passive", "zh", PASSIVE, "刚生成出来的文件有问题", OUT),
    ("passive", "zh", PASSIVE, "被删除的文件恢复一下", OLD),
    ("passive", "zh", PASSIVE, "新建好的目录里放个 README", REPORTS),
    ("passive", "zh", PASSIVE, "生成的那个文件内容是什么", OUT),
    ("passive", "zh", PASSIVE, "那个被删掉的日志文件还能找回来吗", OLD),
    ("passive", "zh", PASSIVE, "写出来的文件发我看看", OUT),
    ("passive", "zh", PASSIVE, "做出来的那个文件夹叫什么", REPORTS),
    ("passive", "zh", PASSIVE, "已经生成好的文件能删吗", OUT),
    ("passive", "zh", PASSIVE, "刚刚被建立的目录在哪", REPORTS),
    ("passive", "zh", PASSIVE, "被删除的文件夹恢复一下", NONE),
    ("passive", "ko", PASSIVE, "생성된 폴더 열어 줘", REPORTS),
    ("passive", "ko", PASSIVE, "만들어진 폴더 이름 바꿔 줘", REPORTS),
    ("passive", "ko", PASSIVE, "방금 생성된 파일 보여 줘", OUT),
    ("passive", "ko", PASSIVE, "삭제된 파일 복구해 줘", OLD),
    ("passive", "ko", PASSIVE, "새로 만들어진 디렉토리에 README 추가해", REPORTS),
    ("passive", "ko", PASSIVE, "지워진 파일 다시 살려 줘", OLD),
    ("passive", "ko", PASSIVE, "작성된 파일 내용 확인해 줘", OUT),
    ("passive", "ko", PASSIVE, "출력된 파일이 너무 커", OUT),
    ("passive", "ko", PASSIVE, "아까 만들어진 폴더 어디 있어?", REPORTS),
    ("passive", "ko", PASSIVE, "생성되었던 파일 지워 줘", OUT),
    ("passive", "ko", PASSIVE, "삭제된 폴더 복구해 줘", NONE),
    ("passive", "ja", PASSIVE, "作成されたフォルダを開いて", REPORTS),
    ("passive", "ja", PASSIVE, "作られたディレクトリの名前を変えて", REPORTS),
    ("passive", "ja", PASSIVE, "生成されたファイルを見せて", OUT),
    ("passive", "ja", PASSIVE, "削除されたファイルを復元して", OLD),
    ("passive", "ja", PASSIVE, "さっき作られたフォルダに README を置いて", REPORTS),
    ("passive", "ja", PASSIVE, "出力されたファイルが大きすぎる", OUT),
    ("passive", "ja", PASSIVE, "消されたファイルを戻して", OLD),
    ("passive", "ja", PASSIVE, "書き出されたファイルの中身は？", OUT),
    ("passive", "ja", PASSIVE, "新しく作成されたディレクトリはどこ？", REPORTS),
    ("passive", "ja", PASSIVE, "生成済みのファイルはコミットしないで", OUT),
    ("passive", "ja", PASSIVE, "削除されたフォルダを戻して", NONE),
    # 2. another actor: a sub-agent's message about what its lead did
    ("actor", "en", ACTOR, "check the config the lead agent set up", SETTINGS),
    ("actor", "en", ACTOR, "the folder the main agent created is empty, fill it", FIXTURES),
    ("actor", "en", ACTOR, "restore the folder the parent agent deleted", LEGACY),
    ("actor", "en", ACTOR, "the file the orchestrator wrote has a typo", SETTINGS),
    ("actor", "en", ACTOR, "look at the file that was created by the lead agent", SETTINGS),
    ("actor", "en", ACTOR, "open the directory your lead made", FIXTURES),
    ("actor", "en", ACTOR, "the config file I set up for you is wrong", SETTINGS),
    ("actor", "en", ACTOR, "use the folder I created before handing this over", FIXTURES),
    ("actor", "en", ACTOR, "the file the coordinator made needs tests", SETTINGS),
    ("actor", "en", ACTOR, "delete the folder you created", SCRATCH),
    ("actor", "en", ACTOR, "what the lead agent just deleted should come back", LEGACY),
    ("actor", "en", ACTOR, "the folder the lead agent renamed", NONE),
    ("actor", "zh", ACTOR, "主代理写的配置文件有问题", SETTINGS),
    ("actor", "zh", ACTOR, "主 agent 建的那个目录是空的", FIXTURES),
    ("actor", "zh", ACTOR, "父代理删除的文件夹要恢复", LEGACY),
    ("actor", "zh", ACTOR, "上级代理刚才创建的文件夹里放点测试数据", FIXTURES),
    ("actor", "zh", ACTOR, "我给你建好的目录在哪", FIXTURES),
    ("actor", "zh", ACTOR, "主代理生成的那个文件内容给我看下", SETTINGS),
    ("actor", "zh", ACTOR, "你刚建的文件夹删掉", SCRATCH),
    ("actor", "zh", ACTOR, "由主代理创建的配置文件", SETTINGS),
    ("actor", "zh", ACTOR, "主智能体新建的文件夹叫什么", FIXTURES),
    ("actor", "zh", ACTOR, "他刚才删的那个目录", LEGACY),
    ("actor", "zh", ACTOR, "主代理改过的文件", NONE),
    ("actor", "ko", ACTOR, "리드 에이전트가 작성한 설정 파일 확인해 줘", SETTINGS),
    ("actor", "ko", ACTOR, "메인 에이전트가 만든 폴더에 데이터 넣어 줘", FIXTURES),
    ("actor", "ko", ACTOR, "상위 에이전트가 삭제한 디렉토리 복구해", LEGACY),
    ("actor", "ko", ACTOR, "부모 에이전트가 방금 생성한 파일 봐 줘", SETTINGS),
    ("actor", "ko", ACTOR, "내가 만든 폴더 써", FIXTURES),
    ("actor", "ko", ACTOR, "네가 만든 폴더 지워", SCRATCH),
    ("actor", "ko", ACTOR, "오케스트레이터가 지운 폴더 살려 줘", LEGACY),
    ("actor", "ko", ACTOR, "리드가 저장한 파일 열어 봐", SETTINGS),
    ("actor", "ko", ACTOR, "리드 에이전트께서 만드신 폴더", FIXTURES),
    ("actor", "ko", ACTOR, "그가 만든 설정 파일", SETTINGS),
    ("actor", "ko", ACTOR, "리드 에이전트가 옮긴 파일", NONE),
    ("actor", "ja", ACTOR, "親エージェントが作った設定ファイルを確認して", SETTINGS),
    ("actor", "ja", ACTOR, "リードエージェントが作成したフォルダにデータを入れて", FIXTURES),
    ("actor", "ja", ACTOR, "メインエージェントが消したディレクトリを戻して", LEGACY),
    ("actor", "ja", ACTOR, "上位エージェントの作ったフォルダはどこ？", FIXTURES),
    ("actor", "ja", ACTOR, "私が用意したフォルダを使って", FIXTURES),
    ("actor", "ja", ACTOR, "あなたが作ったフォルダは消して", SCRATCH),
    ("actor", "ja", ACTOR, "親エージェントが書いたファイルを読んで", SETTINGS),
    ("actor", "ja", ACTOR, "オーケストレーターが削除したフォルダを復元して", LEGACY),
    ("actor", "ja", ACTOR, "親エージェントが先ほど保存したファイル", SETTINGS),
    ("actor", "ja", ACTOR, "リードエージェントが作ってくれたフォルダ", FIXTURES),
    ("actor", "ja", ACTOR, "親エージェントが移動したファイル", NONE),
    # 3. vaguer recency words, with or without a verb
    ("recency", "en", RECENT, "cat that thing from a bit ago", RESULTS),
    ("recency", "en", RECENT, "show me the file from earlier", RESULTS),
    ("recency", "en", RECENT, "open the file you made earlier on", RESULTS),
    ("recency", "en", RECENT, "the file you previously created, print it", RESULTS),
    ("recency", "en", RECENT, "what was in the file from before?", RESULTS),
    ("recency", "en", RECENT, "the one from last time, show it again", RESULTS),
    ("recency", "en", RECENT, "the file you wrote a moment ago has a typo", RESULTS),
    ("recency", "en", RECENT, "the thing you just made, what's in it?", RESULTS),
    ("recency", "en", RECENT, "the file from a few minutes ago", RESULTS),
    ("recency", "en", RECENT, "open the earlier file", RESULTS),
    ("recency", "en", RECENT, "the file you created a little while ago", RESULTS),
    ("recency", "en", CROWD, "the thing from earlier", LOW),
    ("recency", "zh", RECENT, "之前那个文件给我看一下", RESULTS),
    ("recency", "zh", RECENT, "刚才的文件打开", RESULTS),
    ("recency", "zh", RECENT, "先前写的那个文件", RESULTS),
    ("recency", "zh", RECENT, "早些时候生成的文件在哪", RESULTS),
    ("recency", "zh", RECENT, "刚刚那个东西再给我看下", RESULTS),
    ("recency", "zh", RECENT, "上次那个文件内容是什么", RESULTS),
    ("recency", "zh", RECENT, "前面建的文件删掉吧", RESULTS),
    ("recency", "zh", RECENT, "最近的那个文件", RESULTS),
    ("recency", "zh", RECENT, "刚才那个给我看看", RESULTS),
    ("recency", "zh", RECENT, "不久前写的文件", RESULTS),
    ("recency", "zh", CROWD, "之前那个东西", LOW),
    ("recency", "ko", RECENT, "아까 그 파일 보여 줘", RESULTS),
    ("recency", "ko", RECENT, "방금 그거 열어", RESULTS),
    ("recency", "ko", RECENT, "조금 전에 만든 파일", RESULTS),
    ("recency", "ko", RECENT, "이전에 작성한 파일 다시 보여 줘", RESULTS),
    ("recency", "ko", RECENT, "좀 전에 쓴 파일 열어 봐", RESULTS),
    ("recency", "ko", RECENT, "아까 거 보여 줘", RESULTS),
    ("recency", "ko", RECENT, "지난번에 만든 파일", RESULTS),
    ("recency", "ko", RECENT, "방금 전 파일 내용 알려 줘", RESULTS),
    ("recency", "ko", RECENT, "앞서 저장한 파일", RESULTS),
    ("recency", "ko", RECENT, "최근에 만든 파일 열어 줘", RESULTS),
    ("recency", "ko", CROWD, "아까 그거", LOW),
    ("recency", "ja", RECENT, "さっきのファイルを見せて", RESULTS),
    ("recency", "ja", RECENT, "さっきのやつ開いて", RESULTS),
    ("recency", "ja", RECENT, "先ほど作ったファイル", RESULTS),
    ("recency", "ja", RECENT, "前回のファイルをもう一度表示して", RESULTS),
    ("recency", "ja", RECENT, "少し前に書いたファイル", RESULTS),
    ("recency", "ja", RECENT, "この前のやつ、中身見せて", RESULTS),
    ("recency", "ja", RECENT, "以前作成したファイルを削除して", RESULTS),
    ("recency", "ja", RECENT, "たった今作ったファイル", RESULTS),
    ("recency", "ja", RECENT, "ちょっと前に保存したファイル", RESULTS),
    ("recency", "ja", RECENT, "先ほどのファイルの中身", RESULTS),
    ("recency", "ja", CROWD, "さっきのやつ", LOW),
    # 4. writing as creating: heredocs after cd, tee, redirections, file tools
    ("writing", "en", HEREDOC, "add a location block to the file you just wrote", NGINX),
    ("writing", "en", HEREDOC, "the file you wrote, is it valid?", NGINX),
    ("writing", "en", TEE, "show me the file you wrote with tee", ETC),
    ("writing", "en", TOOL, "the file you saved, add a line", TODO),
    ("writing", "en", REDIRECT, "the file you generated, delete it", GEN),
    ("writing", "en", HEREDOC, "the config you've written needs gzip", NGINX),
    ("writing", "en", TOOL, "open the file that was written", TODO),
    ("writing", "en", REDIRECT, "the file you dumped the output into", GEN),
    ("writing", "en", TEE, "the file you wrote to /etc", ETC),
    ("writing", "en", HEREDOC, "what you just wrote, commit it", NGINX),
    ("writing", "en", TWO_WRITES, "the file you wrote", AMBIGUOUS),
    ("writing", "zh", HEREDOC, "你刚写的那个文件加一个 location", NGINX),
    ("writing", "zh", HEREDOC, "写好的配置文件检查一下", NGINX),
    ("writing", "zh", TEE, "用 tee 写入的文件内容给我看看", ETC),
    ("writing", "zh", TOOL, "你保存的文件打开", TODO),
    ("writing", "zh", REDIRECT, "你生成的文件删掉", GEN),
    ("writing", "zh", HEREDOC, "刚才写出来的配置", NGINX),
    ("writing", "zh", TOOL, "刚刚写的笔记", TODO),
    ("writing", "zh", REDIRECT, "输出的那个文件", GEN),
    ("writing", "zh", TEE, "你写的文件在哪", ETC),
    ("writing", "zh", HEREDOC, "你写的那个配置文件", NGINX),
    ("writing", "zh", TWO_WRITES, "你写的文件", AMBIGUOUS),
    ("writing", "ko", HEREDOC, "방금 쓴 파일에 location 추가해", NGINX),
    ("writing", "ko", HEREDOC, "네가 작성한 설정 파일 확인해", NGINX),
    ("writing", "ko", TEE, "tee로 저장한 파일 보여 줘", ETC),
    ("writing", "ko", TOOL, "저장한 파일 열어 줘", TODO),
    ("writing", "ko", REDIRECT, "생성한 파일 지워", GEN),
    ("writing", "ko", HEREDOC, "아까 써 둔 파일", NGINX),
    ("writing", "ko", TOOL, "작성된 파일 보여 줘", TODO),
    ("writing", "ko", REDIRECT, "출력한 파일 삭제해", GEN),
    ("writing", "ko", TEE, "네가 쓴 파일 어디 있어", ETC),
    ("writing", "ko", HEREDOC, "방금 적은 파일", NGINX),
    ("writing", "ko", TWO_WRITES, "방금 쓴 파일", AMBIGUOUS),
    ("writing", "ja", HEREDOC, "さっき書いたファイルに location を追加して", NGINX),
    ("writing", "ja", HEREDOC, "書き込んだ設定ファイルを確認して", NGINX),
    ("writing", "ja", TEE, "tee で書き込んだファイルを見せて", ETC),
    ("writing", "ja", TOOL, "保存したファイルを開いて", TODO),
    ("writing", "ja", REDIRECT, "出力したファイルを消して", GEN),
    ("writing", "ja", HEREDOC, "先ほど書いていただいたファイル", NGINX),
    ("writing", "ja", TOOL, "書いたメモを見せて", TODO),
    ("writing", "ja", REDIRECT, "生成したファイルを削除", GEN),
    ("writing", "ja", TEE, "あなたが書いたファイルはどこ", ETC),
    ("writing", "ja", HEREDOC, "書き出したファイル", NGINX),
    ("writing", "ja", TWO_WRITES, "書いたファイル", AMBIGUOUS),
    # 5. one call, two entities, after a cd: abstain (and one entity: resolve)
    ("cd", "en", CD_MKDIR, "rename that folder to ui", AMBIGUOUS),
    ("cd", "en", CD_MKDIR, "delete the folder you just created", AMBIGUOUS),
    ("cd", "en", CD_MKDIR, "what's in the new folder?", AMBIGUOUS),
    ("cd", "en", CD_MKDIR, "open that dir", AMBIGUOUS),
    ("cd", "en", CD_MKDIR, "the directory you made, add an index", AMBIGUOUS),
    ("cd", "en", CD_TOUCH, "the file you just touched", AMBIGUOUS),
    ("cd", "en", CD_TOUCH, "show that file", AMBIGUOUS),
    ("cd", "en", CD_CHAIN, "the folder that got created", AMBIGUOUS),
    ("cd", "en", CD_CHAIN, "list the last directory", AMBIGUOUS),
    ("cd", "en", CD_CHAIN, "remove that folder", AMBIGUOUS),
    ("cd", "en", CD_ONE, "rename that folder to ui", ONLY),
    ("cd", "zh", CD_MKDIR, "把刚建的那个文件夹删掉", AMBIGUOUS),
    ("cd", "zh", CD_MKDIR, "那个文件夹改名", AMBIGUOUS),
    ("cd", "zh", CD_MKDIR, "你刚创建的目录", AMBIGUOUS),
    ("cd", "zh", CD_MKDIR, "新建的文件夹", AMBIGUOUS),
    ("cd", "zh", CD_MKDIR, "刚才那个目录", AMBIGUOUS),
    ("cd", "zh", CD_TOUCH, "刚创建的文件", AMBIGUOUS),
    ("cd", "zh", CD_TOUCH, "那个文件打开", AMBIGUOUS),
    ("cd", "zh", CD_CHAIN, "被创建的目录", AMBIGUOUS),
    ("cd", "zh", CD_CHAIN, "之前建的那个文件夹", AMBIGUOUS),
    ("cd", "zh", CD_CHAIN, "刚才建好的目录", AMBIGUOUS),
    ("cd", "zh", CD_ONE, "那个文件夹改名", ONLY),
    ("cd", "ko", CD_MKDIR, "방금 만든 폴더 지워", AMBIGUOUS),
    ("cd", "ko", CD_MKDIR, "그 폴더 이름 바꿔", AMBIGUOUS),
    ("cd", "ko", CD_MKDIR, "네가 만든 디렉토리", AMBIGUOUS),
    ("cd", "ko", CD_MKDIR, "생성된 폴더", AMBIGUOUS),
    ("cd", "ko", CD_MKDIR, "아까 그 폴더", AMBIGUOUS),
    ("cd", "ko", CD_TOUCH, "방금 만든 파일", AMBIGUOUS),
    ("cd", "ko", CD_TOUCH, "그 파일 열어", AMBIGUOUS),
    ("cd", "ko", CD_CHAIN, "만들어진 폴더", AMBIGUOUS),
    ("cd", "ko", CD_CHAIN, "아까 만든 디렉토리", AMBIGUOUS),
    ("cd", "ko", CD_CHAIN, "그 디렉토리", AMBIGUOUS),
    ("cd", "ko", CD_ONE, "그 폴더 이름 바꿔", ONLY),
    ("cd", "ja", CD_MKDIR, "さっき作ったフォルダを消して", AMBIGUOUS),
    ("cd", "ja", CD_MKDIR, "そのフォルダの名前を変えて", AMBIGUOUS),
    ("cd", "ja", CD_MKDIR, "作成したディレクトリ", AMBIGUOUS),
    ("cd", "ja", CD_MKDIR, "作られたフォルダ", AMBIGUOUS),
    ("cd", "ja", CD_MKDIR, "さっきのフォルダ", AMBIGUOUS),
    ("cd", "ja", CD_TOUCH, "さっき作ったファイル", AMBIGUOUS),
    ("cd", "ja", CD_TOUCH, "そのファイルを開いて", AMBIGUOUS),
    ("cd", "ja", CD_CHAIN, "生成されたディレクトリ", AMBIGUOUS),
    ("cd", "ja", CD_CHAIN, "先ほど作成したフォルダ", AMBIGUOUS),
    ("cd", "ja", CD_CHAIN, "例のフォルダ", AMBIGUOUS),
    ("cd", "ja", CD_ONE, "そのフォルダの名前を変えて", ONLY),
    # (found by set_b) nouns that name a file by its format or by what it holds
    ("nouns", "en", NOUNS, "the csv you exported has duplicates", CSV),
    ("nouns", "en", NOUNS, "dedupe that csv", CSV),
    ("nouns", "en", NOUNS, "cut the summary you saved to 200 words", SUMMARY),
    ("nouns", "en", NOUNS, "gzip the dump you wrote", DUMP),
    ("nouns", "en", NOUNS, "the markdown file you wrote", SUMMARY),
    ("nouns", "en", NOUNS, "the csv file that got spit out", CSV),
    ("nouns", "en", NOUNS, "the json you generated", NONE),
    ("nouns", "zh", NOUNS, "你导出的那个 csv 有重复", CSV),
    ("nouns", "zh", NOUNS, "那个 csv 文件", CSV),
    ("nouns", "zh", NOUNS, "刚才保存的总结", SUMMARY),
    ("nouns", "zh", NOUNS, "导出的 sql 文件压缩一下", DUMP),
    ("nouns", "zh", NOUNS, "写好的 markdown 文件", SUMMARY),
    ("nouns", "zh", NOUNS, "生成的 json", NONE),
    ("nouns", "ko", NOUNS, "방금 내보낸 csv", CSV),
    ("nouns", "ko", NOUNS, "그 csv 파일", CSV),
    ("nouns", "ko", NOUNS, "저장한 요약", SUMMARY),
    ("nouns", "ko", NOUNS, "생성한 sql 파일", DUMP),
    ("nouns", "ko", NOUNS, "작성한 덤프 압축해", DUMP),
    ("nouns", "ko", NOUNS, "만든 json", NONE),
    ("nouns", "ja", NOUNS, "書き出したcsvを重複除去して", CSV),
    ("nouns", "ja", NOUNS, "そのcsvファイル", CSV),
    ("nouns", "ja", NOUNS, "保存した要約", SUMMARY),
    ("nouns", "ja", NOUNS, "作成したダンプを圧縮", DUMP),
    ("nouns", "ja", NOUNS, "出力されたsqlファイル", DUMP),
    ("nouns", "ja", NOUNS, "生成されたjson", NONE),
]


def _case(row: tuple[str, str, Any, str, str]) -> Any:
    cls, lang, _, text, _want = row
    return pytest.param(row, id=f"{cls}-{lang}-{text}")


@pytest.mark.parametrize("row", [_case(r) for r in TABLE])
def test_reference_class(row: tuple[str, str, Any, str, str]) -> None:
    cls, lang, (cwd, steps, parent), text, want = row
    expect = {"path": want} if want.startswith("/") else {"abstain": True, "why": want}
    outcome = run(Scenario(text, lang, cls, cwd, tuple(steps), text, expect, parent))
    assert outcome.passed, outcome.describe()
    if not want.startswith("/"):  # abstained for that reason (so the mention was read)
        reasons = [r.get("abstained") for r in outcome.references]
        assert want in reasons, outcome.describe()


def test_every_class_has_ten_phrasings_per_language() -> None:
    for cls in ("passive", "actor", "recency", "writing", "cd"):
        for lang in ("en", "zh", "ko", "ja"):
            assert sum(1 for r in TABLE if r[0] == cls and r[1] == lang) >= 10, (cls, lang)
