"""The scheduler events that episodes.py and occupants.py read from trace.sh's trace.txt."""
import re

SWITCH = re.compile(r'\[(\d+)\].* (\d+\.\d+): sched_switch: prev_comm=(.*) prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)')
WAKEUP = re.compile(r'\[(\d+)\].* (\d+\.\d+): sched_wakeup: comm=(.*) pid=(\d+) prio=\d+ target_cpu=(\d+)')
MIGRATE = re.compile(r'\[(\d+)\].* (\d+\.\d+): sched_migrate_task: comm=(.*) pid=(\d+) prio=\d+ orig_cpu=(\d+) dest_cpu=(\d+)')


def events(path):
    """Yields (kind, ts, groups) per sched_switch ('switch'), sched_wakeup ('wakeup') and
    sched_migrate_task ('migrate') line, in file order; groups as the patterns above capture
    them (CPU, timestamp, then the event's fields)."""
    for line in open(path):
        for kind, pattern in (('switch', SWITCH), ('wakeup', WAKEUP), ('migrate', MIGRATE)):
            match = pattern.search(line)
            if match:
                groups = match.groups()
                yield kind, float(groups[1]), groups
                break
