"""A series' named region (results.csv's REGION column, `profile --region`); NULL for the whole
program, as every series stored before. The kept canonical texts of parts (part_text) were
written without the REGION column: they are dropped, and those parts are exported from their
rows (which give the new column, empty) until uploaded again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("series", sa.Column("region", sa.Text(), nullable=True))
    op.execute("DELETE FROM part_text")
    op.execute("DELETE FROM run_summary")  # rebuilt on demand, without the region rows mixed in


def downgrade() -> None:
    with op.batch_alter_table("series") as batch:
        batch.drop_column("region")
