#!/bin/bash
# Builds the group-entity tracer `gs` into the current folder (Debian 12: apt-get install
# clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev). The kernel needs BTF
# (/sys/kernel/btf/vmlinux) and BPF tp_btf programs; kprobes and fentry are not needed (the
# traced VM has neither: CONFIG_KPROBES is off and fentry attach is refused).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h
clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I. -c "$HERE/gs.bpf.c" -o gs.bpf.o
bpftool gen skeleton gs.bpf.o > gs.skel.h
gcc -O2 -Wall -I. "$HERE/gs.c" -o gs -lbpf -lelf -lz
