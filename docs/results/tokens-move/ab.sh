#!/bin/bash
# Landed (a kept token's next task moves back to the leased CPU) vs. not moving back; one binary.
set -u
. "$(dirname "$0")/common.sh"
two_arms /work/notes/s14/ab return noreturn COTENANT_EXP_NO_RETURN
