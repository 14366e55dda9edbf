"""Model layers (thinc) and the process-level torch settings they need."""
from ..runtime.threads import register_fork_handler

register_fork_handler()
