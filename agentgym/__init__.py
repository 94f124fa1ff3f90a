"""agentgym: text-based multi-turn Gymnasium environments for RL on LLM agents.

Importing this package registers every environment under the ``agentgym`` namespace:

    >>> import gymnasium, agentgym
    >>> env = gymnasium.make("agentgym/Sokoban-v0")

``gymnasium.make("agentgym:agentgym/Sokoban-v0")`` imports the package itself. ``agentgym`` imports
without torch.
"""

from agentgym.chat import ChatEpisode
from agentgym.envs import register_all as _register_all
from agentgym.parsing import format_answer, parse_turn
from agentgym.registration import registered_envs
from agentgym.spaces import UnicodeText
from agentgym.text_env import TextEnv

__version__ = "0.1.0"
__all__ = [
    "ChatEpisode",
    "TextEnv",
    "UnicodeText",
    "format_answer",
    "parse_turn",
    "registered_envs",
    "__version__",
]

_register_all()
