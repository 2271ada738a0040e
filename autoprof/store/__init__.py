"""The results store: profiles from many machines in one database, listed, compared, exported.

SQLite (a file in the user's data directory) by default, PostgreSQL (psycopg 3) for a team.
`url` turns what the user typed into a safe-to-print URL, `models` is the schema (`tables` its
plain names and keys), `driver` connects through the database's own driver, `engine` opens a
store for SQLAlchemy and checks its schema version against the migrations shipped here,
`upload` loads an `out/` folder in one transaction (through `driver` alone), `queries` lists,
shows, exports and deletes runs.
"""
