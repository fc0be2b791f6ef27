#!/bin/sh
# gen_lms_fixed_goldens.sh BINARY > lms_fixed_goldens.txt
#
# Records what `tfswap rewrite` wrote with fixed LMS thresholds: for every committed fixture
# and every option set below, the SHA-256 and size of the output graph. The committed file
# was generated with the binary of commit c4e1109 (before `rewrite` planned by default),
# whose rewrite without options was the LMS rewrite with its default thresholds; the test
# TestFixedLMSGoldens checks that today's binary, asked for fixed thresholds, writes the
# same bytes. Each line: fixture, output extension, sha256, size, then the options. Only
# binary output is recorded: Go's prototext inserts whitespace chosen by a hash of the
# executable (protobuf's internal/detrand), so text output differs between two builds.
set -eu
bin=$1
dir=$(cd "$(dirname "$0")/../../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while IFS='|' read -r ext opts; do
	[ -n "$ext" ] || continue
	for f in mlp cnn resnet lstm; do
		out="$tmp/out.$ext"
		# shellcheck disable=SC2086
		"$bin" rewrite "$dir/testmodels/fixtures/$f.pb" -o "$out" $opts >/dev/null
		sum=$(sha256sum "$out" | cut -d' ' -f1)
		size=$(wc -c <"$out" | tr -d ' ')
		printf '%s %s %s %s %s\n' "$f" "$ext" "$sum" "$size" "$opts"
		rm -f "$out"
	done
done <<'CASES'
pb|
pb|--swapout-threshold 3 --swapin-ahead 1 --swapin-groupby 0 --min-bytes 0
pb|--swapout-threshold 20 --swapin-ahead 4 --swapin-groupby 10 --min-bytes 1MiB
pb|--swapout-threshold 6 --exclude-op Relu --exclude-scope gradients/stage1
pb|--swapin-ahead 3 --compute-device /device:GPU:0 --host-device /device:CPU:0
pb|--swapin-groupby -1 --gate device
pb|--exclude-op Conv2D --min-bytes 16KiB
pb|--compute-device /device:CPU:1 --min-bytes 0
CASES
