"""A machine row is keyed by its own columns: rows of one machine that differed only in facts
the table does not hold (topology, TSC frequency: learnt by later autoprof versions) become one.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

from autoprof.store.tables import machine_fingerprint

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# the machine table's columns at this revision, typed so values read back as uploads give them
_COLUMNS: list[sa.ColumnClause] = [
    sa.column("cpu_id", sa.Text()),
    sa.column("model_name", sa.Text()),
    sa.column("hostname", sa.Text()),
    sa.column("kernel", sa.Text()),
    sa.column("perf_version", sa.Text()),
    sa.column("smt", sa.Boolean()),
    sa.column("nmi_watchdog", sa.Boolean()),
    sa.column("perf_event_paranoid", sa.Integer()),
    sa.column("counters", sa.JSON()),
]


def upgrade() -> None:
    conn = op.get_bind()
    machine = sa.table("machine", sa.column("id"), sa.column("fingerprint"), *_COLUMNS)
    part = sa.table("run_part", sa.column("machine_id"))
    keeper: dict[str, int] = {}
    renamed: list[tuple[int, str]] = []
    for row in conn.execute(sa.select(machine).order_by(machine.c.id)).mappings().all():
        key = machine_fingerprint({c.name: row[c.name] for c in _COLUMNS})
        first = keeper.setdefault(key, row["id"])
        if first != row["id"]:  # the same machine: its parts move to the first row
            conn.execute(
                sa.update(part).where(part.c.machine_id == row["id"]).values(machine_id=first)
            )
            conn.execute(sa.delete(machine).where(machine.c.id == row["id"]))
        elif row["fingerprint"] != key:
            renamed.append((row["id"], key))
    for row_id, key in renamed:  # after the deletions: a new key may be a deleted row's old one
        conn.execute(sa.update(machine).where(machine.c.id == row_id).values(fingerprint=key))


def downgrade() -> None:
    """Nothing to undo: the merged rows' other facts live on in their parts' manifests."""
