"""Where a pool's nodes come from: reservations, hourly capacity and GPU queuing modes, in the order the pool falls back through."""
