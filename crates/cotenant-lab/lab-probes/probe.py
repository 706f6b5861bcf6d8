# What Python's executors size themselves by: os.process_cpu_count() from 3.13 (it honours
# the affinity mask), os.cpu_count() before (ThreadPoolExecutor uses min(32, that + 4)).
import os

count = getattr(os, "process_cpu_count", os.cpu_count)()
print(count)
