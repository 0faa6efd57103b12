#!/usr/bin/env bash
# What a newcomer meets: build the wheel, install it in clean virtual environments and
# run every command once, as the README tells a new user to.
#
#   scripts/newcomer.sh [WORKDIR]      (default: a fresh temporary directory)
#
# Three environments, each made with `python -m venv` from nothing:
#   base   pip install torchwise-*.whl                  review, rules, ckpt scan/inspect;
#                                                       the model commands say what to install
#   torch  pip install 'torchwise-*.whl[torch]' torch==2.13.0  (the pinned CPU build)
#   all    pip install 'torchwise-*.whl[torch,project,mcp]' torch==2.13.0 pytest
# Every command's stderr is checked: no torch warning (e.g. "Failed to initialize NumPy"),
# no "internal error", no traceback, and every exit code is the one expected.
# Exit 0 when all held; the failures are listed otherwise.
#
# TORCH_SPEC overrides the torch requirement (default torch==2.13.0: any other spec may pull
# gigabytes of CUDA packages on Linux).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${1:-$(mktemp -d -t torchwise-newcomer.XXXXXX)}"
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
FAILURES=()
RUNS=0
# Checks that fail on this branch and pass on another helper's (issue 26); the lead
# empties this at merge. "label" -> the branch that fixes it.
declare -A FIXED_ON_OTHER_BRANCHES=(
    ["inspect --device cuda (bad input)"]="doctor"
)

say() { printf '\n== %s ==\n' "$*"; }

# check LABEL EXPECTED_EXIT COMMAND... : run it in $PROJECT, judge exit code and stderr.
check() {
    local label="$1" expected="$2"
    shift 2
    local out="$WORK/logs/$ENV_NAME-$RUNS"
    RUNS=$((RUNS + 1))
    (cd "$PROJECT" && "$@" >"$out.out" 2>"$out.err" </dev/null)
    local code=$?
    local verdict="ok"
    if [[ "$code" != "$expected" ]]; then
        verdict="exit $code, expected $expected"
    elif grep -qiE "warning: .*numpy|Failed to initialize NumPy|UserWarning|FutureWarning|DeprecationWarning" "$out.err"; then
        verdict="a warning on stderr"
    elif grep -qE "internal error|Traceback \(most recent call last\)" "$out.err" "$out.out"; then
        verdict="an internal error or a traceback"
    fi
    local first
    first="$(head -n 1 "$out.err")"
    local owner="${FIXED_ON_OTHER_BRANCHES[$label]:-}"
    if [[ "$verdict" != "ok" && -n "$owner" ]]; then
        verdict="$verdict (fixed on the $owner branch)"
    fi
    printf '  %-44s %s%s\n' "$label" "$verdict" "${first:+   | $first}"
    if [[ "$verdict" != "ok" && -z "$owner" ]]; then
        FAILURES+=("$ENV_NAME: $label: $verdict (see $out.err)")
    fi
}

make_venv() {
    ENV_NAME="$1"
    shift
    say "environment '$ENV_NAME': pip install $*"
    "$PYTHON" -m venv "$WORK/$ENV_NAME"
    VENV="$WORK/$ENV_NAME"
    local start=$SECONDS
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" \
        >"$WORK/logs/pip-$ENV_NAME.log" 2>&1; then
        FAILURES+=("$ENV_NAME: pip install failed (see $WORK/logs/pip-$ENV_NAME.log)")
        tail -n 5 "$WORK/logs/pip-$ENV_NAME.log"
        return 1
    fi
    local size
    size="$(du -sm "$VENV" | cut -f1)"
    echo "  installed in $((SECONDS - start)) s; environment $size MB"
    TW="$VENV/bin/torchwise"
    PY="$VENV/bin/python"
}

# A small project of the kind the README's commands expect.
make_project() {
    PROJECT="$WORK/project-$ENV_NAME"
    rm -rf "$PROJECT"
    mkdir -p "$PROJECT"
    cat >"$PROJECT/model.py" <<'EOF'
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, hidden)
        self.fc2 = nn.Linear(hidden, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))
EOF
    cat >"$PROJECT/train.py" <<'EOF'
import torch

from model import Net

model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    optimizer.step()
state = torch.load("net.pt")
EOF
    printf '# A tiny project\n\n```bash\npython train.py\n```\n' >"$PROJECT/README.md"
    # a pickle checkpoint made without torch: a dict of plain values (protocol 2)
    "$PYTHON" -c "import pickle; pickle.dump({'epoch': 1, 'lr': 0.1}, open('$PROJECT/state.pt', 'wb'), protocol=2)"
}

# The commands that need nothing but the base install, in every environment.
light_commands() {
    check "--version" 0 "$TW" --version
    check "--help" 0 "$TW" --help
    check "review ." 1 "$TW" review . --no-cache
    check "review -q ." 1 "$TW" review -q . --no-cache
    check "rules" 0 "$TW" rules
    check "rules TW101" 0 "$TW" rules TW101
    check "ckpt scan state.pt" 0 "$TW" ckpt scan state.pt
    check "ckpt inspect state.pt" 0 "$TW" ckpt inspect state.pt
    check "review missing.py (bad input)" 2 "$TW" review missing.py
}

mkdir -p "$WORK/logs"
say "building the wheel from $ROOT"
rm -rf "$WORK/dist"
if ! "$PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation -w "$WORK/dist" "$ROOT" \
    >"$WORK/logs/wheel.log" 2>&1; then
    # no setuptools next to this Python: let pip build in an isolated environment
    "$PYTHON" -m pip wheel --quiet --no-deps -w "$WORK/dist" "$ROOT" >"$WORK/logs/wheel.log" 2>&1 ||
        { cat "$WORK/logs/wheel.log"; exit 2; }
fi
WHEEL="$(ls "$WORK"/dist/torchwise-*.whl)"
echo "  $WHEEL ($(du -k "$WHEEL" | cut -f1) kB)"

# 1. base: no torch. The model commands say they need PyTorch, with the CPU-only hint.
if make_venv base "$WHEEL"; then
    make_project
    light_commands
    for command in inspect doc doctor tests tune; do
        check "$command (needs PyTorch)" 2 "$TW" "$command" model.py:Net --input 'f32[2,8]'
    done
    check "ckpt convert (needs PyTorch)" 2 "$TW" ckpt convert state.pt -o state.safetensors
    check "project (needs pydantic)" 2 "$TW" project .
    check "mcp (needs the MCP SDK)" 2 "$TW" mcp
    check "agents install (needs pydantic)" 2 "$TW" agents install
    if grep -l "needs PyTorch" "$WORK"/logs/base-*.err | xargs -r grep -L "download.pytorch.org/whl/cpu" | grep -q .; then
        FAILURES+=("base: the 'needs PyTorch' message gives no CPU-only install")
    fi
fi

# 2. [torch]: the model commands on the pinned CPU build.
torch_commands() {
    check "inspect model.py:Net" 0 "$TW" inspect model.py:Net --input 'f32[2,8]'
    check "doc --diff" 1 "$TW" doc model.py:Net --input 'f32[2,8]' --diff
    check "doctor" 0 "$TW" doctor model.py:Net --input 'f32[4,8]' --checks grad-flow,nan-inf
    check "inspect zoo:resnet18" 0 "$TW" inspect zoo:resnet18 --depth 1
    (cd "$PROJECT" && "$PY" -c "import torch; from model import Net; torch.save(Net().state_dict(), 'net.pt')")
    check "ckpt inspect net.pt" 0 "$TW" ckpt inspect net.pt
    check "ckpt convert net.pt" 0 "$TW" ckpt convert net.pt -o net.safetensors
    # the generated tests are run once before they are written: that needs pytest
    check "tests -o" "$TESTS_EXIT" "$TW" tests model.py:Net --input 'f32[2,8]' -o tests/test_net.py --checks grad-flow
    check "tune --budget 5" 0 "$TW" tune model.py:Net --input 'f32[8,8]' --budget 5 --knobs threads --no-profile
    check "inspect --device cuda (bad input)" 2 "$TW" inspect model.py:Net --input 'f32[2,8]' --device cuda
    check "inspect nope.py:Net (bad input)" 2 "$TW" inspect nope.py:Net --input 'f32[2,8]'
}
if make_venv torch "$WHEEL[torch]" "$TORCH_SPEC"; then
    make_project
    TESTS_EXIT=2  # no pytest here: `tests` says so
    light_commands
    torch_commands
    check "project (needs pydantic)" 2 "$TW" project .
fi

# 3. everything: project, mcp and agents too.
if make_venv all "$WHEEL[torch,project,mcp]" "$TORCH_SPEC" pytest; then
    make_project
    TESTS_EXIT=0
    light_commands
    torch_commands
    check "project ." 0 "$TW" project . --max-models 1 --doctor grad-flow
    check "project --no-import --format json" 0 "$TW" project . --no-import --format json
    check "mcp (stdin closed)" 0 "$TW" mcp --root .
    check "agents install" 0 "$TW" agents install --host claude --host cursor --host vscode
    if grep -q "$VENV" "$PROJECT/.mcp.json" "$PROJECT/.cursor/mcp.json" "$PROJECT/.vscode/mcp.json"; then
        FAILURES+=("all: agents install wrote this machine's interpreter path into an MCP config")
    fi
fi

say "summary: $RUNS commands run in $WORK"
if ((${#FAILURES[@]})); then
    printf '  FAILED: %s\n' "${FAILURES[@]}"
    exit 1
fi
echo "  every command behaved: no torch warning, no internal error, the expected exit codes"
