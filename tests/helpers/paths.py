"""Where the data the tests read lives in the repository (nothing outside it)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KB = ROOT / "data" / "kb"  # the bundled knowledge base
CHUNKING_EVAL = ROOT / "data" / "chunking_eval"  # Chroma's chunking benchmark (MIT)
TREC_EVAL_REFERENCE = ROOT / "tests" / "data" / "trec_eval_reference"  # trec_eval 10.0's regression outputs
OLD_STORE = ROOT / "tests" / "data" / "old_store"  # a store written before the subpackages (commit 474223c)
