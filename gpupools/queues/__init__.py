"""Team queues: teams and their quotas, the queue engine choice, Kueue and ResourceQuota."""
