"""Run summaries (what a run's page shows first, computed once), and measurement tables made
for bulk loads and ordered reads: PostgreSQL drops the (part_id, seq) b-tree for a BRIN index
(the b-tree, grown row by row, made a COPY 1.8x slower); SQLite keeps rows in their key's
b-tree (WITHOUT ROWID: one b-tree, not a table and an index).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_INDEX = "ix_measurement_part_seq"


def _measurement(name: str, **options) -> None:
    op.create_table(
        name,
        sa.Column("part_id", sa.Integer(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("series", sa.Integer(), nullable=False),
        sa.Column("interval_index", sa.BigInteger(), nullable=True),
        sa.Column("time", sa.Double(), nullable=True),
        sa.Column("sample_value", sa.Double(), nullable=True),
        sa.Column("percent_running", sa.Double(), nullable=True),
        sa.Column("status", sa.Text(), nullable=True),
        **options,
    )


def _rebuild_sqlite(with_rowid: bool) -> None:
    _measurement("measurement_rebuilt", sqlite_with_rowid=with_rowid)
    op.execute("INSERT INTO measurement_rebuilt SELECT * FROM measurement ORDER BY part_id, seq")
    op.drop_table("measurement")
    op.rename_table("measurement_rebuilt", "measurement")


def upgrade() -> None:
    op.create_table(
        "run_summary",
        sa.Column(
            "run_id", sa.Integer(), sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("name", sa.Text(), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("measurement_pkey", "measurement", type_="primary")
        op.create_index(_INDEX, "measurement", ["part_id", "seq"], postgresql_using="brin")
    else:
        _rebuild_sqlite(with_rowid=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index(_INDEX, "measurement")
        op.create_primary_key("measurement_pkey", "measurement", ["part_id", "seq"])
    else:
        _rebuild_sqlite(with_rowid=True)
    op.drop_table("run_summary")
