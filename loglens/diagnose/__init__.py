"""`loglens diagnose`: what limits this server, as ranked findings with their evidence.

inputs (store → Decode intervals with context) → step_model (fixed + per-request step time)
→ context (shared numbers) → findings_* (one function per finding) → report (one dict) → render.
"""

from loglens.diagnose.inputs import NoDecodeData
from loglens.diagnose.report import diagnose

__all__ = ["NoDecodeData", "diagnose"]
