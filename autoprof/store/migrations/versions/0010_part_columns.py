"""A one-part run's measurement columns, kept compressed beside its rows at upload: its page's
summary reads them instead of every row (`autoprof.store.columns`). Parts stored before have
none and are read from their rows, as before.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "part_columns",
        sa.Column(
            "part_id",
            sa.Integer(),
            sa.ForeignKey("run_part.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("piece", sa.Integer(), primary_key=True),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":  # already compressed: no TOAST compression
        op.execute("ALTER TABLE part_columns ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("part_columns")
