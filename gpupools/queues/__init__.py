"""Team queues: teams and their quotas, the queue engine choice, Kueue, KAI Scheduler and ResourceQuota."""
