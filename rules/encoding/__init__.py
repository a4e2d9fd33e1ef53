"""The ``fix_encoding`` rule and the mojibake reversals it uses (cp1252/latin-1 through ftfy,
UTF-8 read as cp949).

May import the top-level modules of ``rules`` only."""
