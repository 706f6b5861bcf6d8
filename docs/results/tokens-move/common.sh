# Sourced by ab.sh and nudge.sh: both ran two arms of one binary, alternated twice, on the
# same `lab neighbours` command (one cgroup, 2 processes, 70 % load, 5 repeats of 20 s).
B=/work/main/target/release/cotenant

# two_arms OUT PLAIN SWITCHED SWITCH: rounds 1 and 2 of arm PLAIN as is, then arm SWITCHED
# with the environment switch SWITCH=1; rows in OUT/<arm>-<round>/, logs in OUT-<arm>-<round>.log.
two_arms() {
  local out=$1 plain=$2 switched=$3 switch=$4
  for round in 1 2; do
    $B lab neighbours --setting one-cgroup --processes 2 --load 0.7 --repeats 5 --seconds 20 --out "$out/$plain-$round" > "$out-$plain-$round.log" 2>&1
    env "$switch=1" $B lab neighbours --setting one-cgroup --processes 2 --load 0.7 --repeats 5 --seconds 20 --out "$out/$switched-$round" > "$out-$switched-$round.log" 2>&1
  done
}
