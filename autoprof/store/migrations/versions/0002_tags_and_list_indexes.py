"""Run tags, and the indexes behind `runs list` filters (machine, date, tag).

Revision ID: 0002
Revises: 0001
Create Date: 2024-06-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_tag",
        sa.Column(
            "run_id",
            sa.Integer(),
            sa.ForeignKey("run.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )
    op.create_index("ix_run_tag_key_value", "run_tag", ["key", "value"])
    op.create_index("ix_run_created", "run", ["created"])
    op.create_index("ix_machine_cpu_id", "machine", ["cpu_id"])
    op.create_index("ix_machine_hostname", "machine", ["hostname"])
    op.create_index("ix_run_part_machine_id", "run_part", ["machine_id"])


def downgrade() -> None:
    op.drop_index("ix_run_part_machine_id", "run_part")
    op.drop_index("ix_machine_hostname", "machine")
    op.drop_index("ix_machine_cpu_id", "machine")
    op.drop_index("ix_run_created", "run")
    op.drop_table("run_tag")
