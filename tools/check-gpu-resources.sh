#!/bin/sh
# Checks every kernel of a .cu file against cuda/resource-budget.txt, per architecture.
#
# Usage:
#   check-gpu-resources.sh -b BUDGET -o REPORT_OUT -a "sm_90 sm_80" -- NVCC [ARGS...] SOURCE
#       compiles SOURCE to cubins (one per architecture) with ptxas's resource report, spills and
#       local memory as errors, and checks the report;
#   check-gpu-resources.sh -b BUDGET -o REPORT_OUT -r PTXAS_REPORT
#       checks a report saved earlier (how the checker's own test runs it without nvcc).
#
# Fails (exit 1, one line per problem naming the kernel and the architecture) when ptxas fails
# (a spill or local memory included), when a kernel uses more registers or static shared memory
# than its budget line allows, when it has a stack frame, or when no budget line matches it. On
# success REPORT_OUT lists each kernel's registers and shared memory per architecture.
#
# Budget lines: KERNEL ARCH MAX_REGISTERS MAX_STATIC_SMEM_BYTES, KERNEL a shell pattern over the
# demangled name without its parameter list and without spaces (`rmsnorm_*`, `attn<float,64>`),
# ARCH an architecture or `*`; the first matching line wins.
set -eu

budget= out= archs="sm_90 sm_80" report_in=
while getopts b:o:a:r: opt; do
	case $opt in
	b) budget=$OPTARG ;;
	o) out=$OPTARG ;;
	a) archs=$OPTARG ;;
	r) report_in=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ "${1-}" = -- ] && shift
if [ -z "$budget" ] || [ -z "$out" ] || { [ -z "$report_in" ] && [ $# -lt 2 ]; }; then
	echo "usage: $0 -b BUDGET -o OUT [-a ARCHS] (-r REPORT | -- NVCC [ARGS...] SOURCE)" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ -n "$report_in" ]; then
	cp "$report_in" "$tmp/report"
	what=$report_in
else
	eval "what=\${$#}"
	: >"$tmp/report"
	for arch in $archs; do
		if ! "$@" -cubin -arch="$arch" -Xptxas=-v,-warn-spills,-warn-lmem-usage \
			--Werror=all-warnings -o "$tmp/$arch.cubin" >>"$tmp/report" 2>&1; then
			cat "$tmp/report" >&2
			echo "$what: compiling for $arch failed (see above; a spill or local memory is an error)" >&2
			exit 1
		fi
	done
fi

# One record per kernel: arch, registers, static shared memory, stack frame, mangled name.
awk '
/Compiling entry function/ {
	if (name != "") print arch, regs, smem, stack, name
	n = split($0, q, "\047")
	name = q[2]; arch = q[4]; regs = -1; smem = 0; stack = 0
	next
}
/bytes stack frame/ && name != "" { stack = $1 + 0 }
/Used [0-9]+ registers/ && name != "" {
	for (i = 1; i <= NF; i++) {
		if ($i == "registers," || $i == "registers") regs = $(i - 1) + 0
		if ($i ~ /^smem/) smem = $(i - 2) + 0
	}
}
END { if (name != "") print arch, regs, smem, stack, name }
' "$tmp/report" >"$tmp/kernels"

if [ ! -s "$tmp/kernels" ]; then
	echo "$what: no kernel in the ptxas report" >&2
	exit 1
fi

demangle=cat
if command -v c++filt >/dev/null 2>&1; then
	demangle=c++filt
fi

status=0
: >"$tmp/out"
while read -r arch regs smem stack mangled; do
	full=$(printf '%s\n' "$mangled" | $demangle)
	name=${full%%(*}
	name=$(printf '%s' "${name#void }" | tr -d ' ')
	line=$(grep -Ev '^[[:space:]]*(#|$)' "$budget" | while read -r pat parch preg psmem; do
		# shellcheck disable=SC2254 # the budget's patterns are globs on purpose
		case $name in
		$pat) case $arch in $parch) echo "$preg $psmem" && break ;; esac ;;
		esac
	done)
	if [ -z "$line" ]; then
		echo "$what: kernel '$name' ($arch) has no line in $budget; add one: <pattern> $arch <max registers> <max static smem bytes>" >&2
		status=1
		continue
	fi
	set -- $line
	if [ "$regs" -lt 0 ]; then
		echo "$what: kernel '$name' ($arch): no register count in the ptxas report" >&2
		status=1
	elif [ "$regs" -gt "$1" ]; then
		echo "$what: kernel '$name' ($arch) uses $regs registers, its budget is $1" >&2
		status=1
	fi
	if [ "$smem" -gt "$2" ]; then
		echo "$what: kernel '$name' ($arch) uses $smem bytes of static shared memory, its budget is $2" >&2
		status=1
	fi
	if [ "$stack" -gt 0 ]; then
		echo "$what: kernel '$name' ($arch) has a $stack-byte stack frame (local memory)" >&2
		status=1
	fi
	printf '%-8s %4s registers (budget %s), %6s bytes static smem (budget %s): %s\n' \
		"$arch" "$regs" "$1" "$smem" "$2" "$name" >>"$tmp/out"
done <"$tmp/kernels"

[ "$status" -eq 0 ] || exit 1
cp "$tmp/out" "$out"
