"""The environment as a Model Context Protocol server (extra ``[mcp]``, the official SDK).

Tools: ``reset``, ``choose_action(name)``, ``run_action(name, arguments)``, ``status``. Each
returns the environment's observation text, exactly what a chat agent would see.

    python -m icml26_agent_rosetta.mcp_server            # stdio, an HP task (demo)
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import MCPServer  # mcp >= 2 (FastMCP in 1.x)

from .env import RosettaEnv


def build_server(env: RosettaEnv, name: str = "agent-rosetta") -> Any:
    """An MCP server whose tools drive ``env``."""
    server = MCPServer(name, instructions=env.intro())

    @server.tool()
    def reset() -> str:
        """Start the episode again; returns the task and the starting designs."""
        return env.reset()[0]

    @server.tool()
    def choose_action(name: str) -> str:
        """Phase 1: choose rotamer_change, backbone_change or go_back_to_step; returns its docs."""
        return env.step(json.dumps({"action": "choose_action", "arguments": {"name": name}}))[0]

    @server.tool()
    def run_action(name: str, arguments: dict[str, Any]) -> str:
        """Phase 2: run the chosen action with its arguments; returns the ensemble summary."""
        return env.step(json.dumps({"action": name, "arguments": arguments}))[0]

    @server.tool()
    def status() -> str:
        """Steps used, valid actions so far and the best feasible objective."""
        return json.dumps(
            {"step": env.steps, "valid": env.n_valid, "phase": env.phase, "best": env.best()}
        )

    return server


if __name__ == "__main__":  # pragma: no cover
    from .hp import HPBackend, hp_task

    build_server(RosettaEnv(hp_task(), HPBackend())).run()
