"""``workspace:`` in the config: the opt-in bootstrap of a sidecar proxy that shares the agent's
workspace (``proxy.workspace``). The root comes from here only, never from a request; a
multi-tenant gateway (``auth.mode: keys``) is refused one unless ``allow_with_keys`` says the
operator means it."""

from __future__ import annotations

from pydantic import Field, field_validator

from proxy.strict_model import Strict


class WorkspaceSettings(Strict):
    root: str | None = Field(
        default=None,
        description="the agent's workspace folder, read (read-only) on a session's first request "
        "to picture the project in the first injected block; unset: off",
    )
    roots: dict[str, str] = Field(
        default_factory=dict,
        description="per upstream name, its own workspace folder (wins over `root`)",
    )
    budget_ms: float = Field(
        default=50.0,
        gt=0,
        le=5_000,
        description="how long a request waits for the picture; when it is not ready, a later "
        "request of the session carries it",
    )
    max_depth: int = Field(default=2, ge=0, le=6, description="folder levels of the tree shown")
    max_entries: int = Field(
        default=120, ge=1, le=2_000, description="tree entries listed, at most"
    )
    max_scanned: int = Field(
        default=5_000,
        ge=10,
        le=200_000,
        description="directory entries looked at, at most (a huge tree is cut here)",
    )
    max_file_bytes: int = Field(
        default=65_536,
        ge=256,
        le=4_194_304,
        description="a manifest, README or instruction file is read up to this size",
    )
    refresh_s: float = Field(
        default=30.0,
        ge=0,
        description="a picture taken this recently serves another session's first request",
    )
    git_timeout_s: float = Field(
        default=2.0, gt=0, le=30, description="time allowed to `git status` for the dirty files"
    )
    allow_with_keys: bool = Field(
        default=False,
        description="accept a workspace root with `auth.mode: keys` (a gateway serving several "
        "principals would show each the same folder: refused unless this is set)",
    )

    @field_validator("root")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("an absolute path")
        return value

    @field_validator("roots")
    @classmethod
    def _absolute_each(cls, value: dict[str, str]) -> dict[str, str]:
        for name, path in value.items():
            if not path.startswith("/"):
                raise ValueError(f"{name}: an absolute path")
        return value

    @property
    def enabled(self) -> bool:
        return bool(self.root or self.roots)

    def root_for(self, upstream: str | None) -> str | None:
        if upstream is not None and upstream in self.roots:
            return self.roots[upstream]
        return self.root

    def keys_mode_problems(self) -> list[str]:
        """Why this workspace may not serve ``auth.mode: keys`` (several principals)."""
        if not self.enabled or self.allow_with_keys:
            return []
        return [
            "workspace.root: refused with auth.mode: keys (every principal would see the same "
            "folder); set workspace.allow_with_keys: true if this gateway serves one workspace"
        ]
