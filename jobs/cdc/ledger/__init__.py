"""The offsets ledger: claims, commits, the lease, its tables and its snapshot expiry."""
