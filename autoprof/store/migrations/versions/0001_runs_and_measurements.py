"""Machines, runs, run parts, series and measurements.

Revision ID: 0001
Revises:
Create Date: 2024-06-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "machine",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False, unique=True),
        sa.Column("cpu_id", sa.Text(), nullable=False),
        sa.Column("model_name", sa.Text(), nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("kernel", sa.Text(), nullable=False),
        sa.Column("perf_version", sa.Text(), nullable=False),
        sa.Column("smt", sa.Boolean(), nullable=False),
        sa.Column("nmi_watchdog", sa.Boolean(), nullable=False),
        sa.Column("perf_event_paranoid", sa.Integer(), nullable=True),
        sa.Column("counters", sa.JSON(), nullable=False),
    )
    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("uuid", sa.String(36), nullable=False, unique=True),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("command_line", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(), nullable=False),
        sa.Column("started", sa.DateTime(), nullable=True),
        sa.Column("ended", sa.DateTime(), nullable=True),
        sa.Column("autoprof_version", sa.Text(), nullable=False),
        sa.Column("parts_expected", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("uploaded", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "run_part",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "run_id", sa.Integer(), sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), sa.ForeignKey("machine.id"), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("records", sa.JSON(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("uploaded", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("run_id", "part"),
    )
    op.create_table(
        "series",
        sa.Column(
            "part_id",
            sa.Integer(),
            sa.ForeignKey("run_part.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("number", sa.Integer(), primary_key=True),
        sa.Column("event_name", sa.Text(), nullable=True),
        sa.Column("socket", sa.BigInteger(), nullable=True),
        sa.Column("core", sa.BigInteger(), nullable=True),
        sa.Column("cpu", sa.BigInteger(), nullable=True),
        sa.Column("node", sa.BigInteger(), nullable=True),
        sa.Column("unit", sa.Text(), nullable=True),
        sa.Column("plan_run", sa.BigInteger(), nullable=True),
        sa.Column("repeat", sa.BigInteger(), nullable=True),
        sa.Column("pmu", sa.Text(), nullable=True),
        sa.Column("value_unit", sa.Text(), nullable=True),
    )
    op.create_table(
        "measurement",
        sa.Column("part_id", sa.Integer(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("series", sa.Integer(), nullable=False),
        sa.Column("interval_index", sa.BigInteger(), nullable=True),
        sa.Column("time", sa.Double(), nullable=True),
        sa.Column("sample_value", sa.Double(), nullable=True),
        sa.Column("percent_running", sa.Double(), nullable=True),
        sa.Column("status", sa.Text(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("measurement")
    op.drop_table("series")
    op.drop_table("run_part")
    op.drop_table("run")
    op.drop_table("machine")
