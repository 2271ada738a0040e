"""Run kinds: a stored run is a profile (`autoprof profile`) or a benchmark (`autoprof bench`).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:  # SQLite: ALTER through a copy of the table
        batch.add_column(sa.Column("kind", sa.String(16), nullable=False, server_default="profile"))
    op.create_index("ix_run_kind", "run", ["kind"])


def downgrade() -> None:
    op.drop_index("ix_run_kind", "run")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("kind")
