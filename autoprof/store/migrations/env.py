"""Alembic environment, driven programmatically by `autoprof.store.engine` (no alembic.ini).

The caller passes an open connection (inside a transaction that holds the store's migration
lock) in ``config.attributes["connection"]``.
"""

from alembic import context

from autoprof.store.driver import VERSION_TABLE
from autoprof.store.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
