"""A part's results text, kept compressed beside its rows when it is their canonical text: a
one-part run's export is then decompress-and-send (`autoprof.store.text`). Parts stored before
have none and are written from their rows, as before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "part_text",
        sa.Column(
            "part_id",
            sa.Integer(),
            sa.ForeignKey("run_part.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("piece", sa.Integer(), primary_key=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":  # already compressed: no TOAST compression
        op.execute("ALTER TABLE part_text ALTER COLUMN data SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("part_text")
