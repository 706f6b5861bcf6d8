#!/bin/bash
# Two arms, one binary: leases pin for the task (as landed) vs. nudge (move, then unpin at once).
set -u
. "$(dirname "$0")/common.sh"
two_arms /work/notes/s14/nudge pin nudge COTENANT_EXP_NUDGE
