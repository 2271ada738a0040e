"""Per-function rows of the sampled recordings kept with a profile (`autoprof report`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "function_row",
        sa.Column(
            "part_id",
            sa.Integer(),
            sa.ForeignKey("run_part.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("recording", sa.Text(), primary_key=True),
        sa.Column("row", sa.Integer(), primary_key=True),
        sa.Column("event_index", sa.Integer(), primary_key=True),
        sa.Column("symbol", sa.Text(), nullable=False),
        sa.Column("dso", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("period", sa.BigInteger(), nullable=False),
        sa.Column("samples", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("function_row")
