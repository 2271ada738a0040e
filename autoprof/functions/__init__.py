"""Per-function tables of a sampling profile: every sampled event side by side (`table`), shown
as a terminal table or written as CSV (`render`)."""
