"""The results store: profiles from many machines in one database, listed, compared, exported.

SQLite (a file in the user's data directory) by default, PostgreSQL (psycopg 3) for a team.
`url` turns what the user typed into a safe-to-print URL, `models` is the schema, `engine`
opens a store and checks its schema version against the migrations shipped here, `upload`
loads an `out/` folder in one transaction, `queries` lists, shows, exports and deletes runs.
"""
