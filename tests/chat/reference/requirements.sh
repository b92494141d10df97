# What tests/chat's comparison scripts share, sourced after they set `test` (the ctest name) and
# `compared` (what a skip leaves unchecked): skip(), which exits 77 (ctest's skip) or 1 when the
# VARIABLE it names is 1 (GENESIS_REQUIRE_PYTHON, GENESIS_REQUIRE_NODE), and the check that
# Debian's python3 with jinja2 is there (`python` names it).
python=/usr/bin/python3

skip() {  # VARIABLE REASON
  if [ "${!1:-}" = 1 ]; then
    echo "$test: $1=1, but this test cannot run here: $2" >&2
    exit 1
  fi
  echo "$test: skipped: $2, so $compared ($1=1 makes this a failure)"
  exit 77
}
[ -x "$python" ] || skip GENESIS_REQUIRE_PYTHON "$python is missing (apt-get install python3)"
"$python" -c 'import jinja2' 2> /dev/null ||
  skip GENESIS_REQUIRE_PYTHON "jinja2 is missing (apt-get install python3-jinja2)"
