"""Documents taken in and removed: upload intake, removal, uploads in flight, re-embedding."""
