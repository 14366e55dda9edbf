"""Model layers (thinc) and the process-level torch settings they need."""
from .threads import register_fork_handler

register_fork_handler()
