"""What the benches share: the HTTP client, the server process, the peers, scenario cores,
reports and targets."""
