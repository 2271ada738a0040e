"""Small shared utilities every layer may use: versioned JSON records written atomically, the
declared options, UTC clocks, XDG folders, URL masking, the status vocabularies and the
renderer contract with its one writer. They import nothing of autoprof but `errors`."""
