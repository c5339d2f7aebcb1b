"""q4m-monitor: Prometheus metrics and a web dashboard for q4m queues, run next to mariadbd."""
