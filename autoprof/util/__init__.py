"""Small shared utilities every layer may use: versioned JSON records, UTC clocks, XDG
folders, URL masking, the status vocabularies and the renderer contract. They import
nothing of autoprof but `errors`."""
