"""Options several commands share and that a command with a quick way declares before it knows which way it takes
(agent/cli/_common.py has the rest)."""

from __future__ import annotations

import click

json_option = click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
