"""The broker only: partition offsets and watermarks, the batch plan (offset ranges), the one range-reading loop, the
topics a pattern resolves to."""
