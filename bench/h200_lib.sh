# Sourced by the bench/h200_*.sh scripts: what every one of them does before and after its runs.
#   h200_begin "$@"   BINARY OUTDIR from the arguments (usage from the script's name), a scratch
#                     folder $o, the log $log, the loaders (h200_env.sh), the seed shape $SEED and
#                     `step CMD...` (runs CMD between "## CMD" and "## exit N" lines)
#   h200_end NAME     copies the log to OUTDIR/log.txt, packs $o into OUTDIR/NAME.tar.gz (the
#                     device returns few files) and prints the summary lines of the log
set -u
h200_begin() {
  B=${1:?usage: bash $0 BINARY OUTDIR}
  out=${2:?usage: bash $0 BINARY OUTDIR}
  o=$(mktemp -d)
  source bench/h200_env.sh
  SEED="--batch 8 --heads 16 --head-dim 64"
  log="$o/log.txt"
}
step() { echo "## $*"; "$@"; echo "## exit $?"; }
h200_end() {
  mkdir -p "$out"
  cp "$log" "$out/log.txt"
  tar czf "$out/$1.tar.gz" -C "$o" .
  grep -hE "^(## [^e]|unfused|tiled|math|split|attention|naive|flash|efficient|cudnn|Auto|  [a-z])" "$log" \
    | grep -v "^## exit 0" | cut -c1-160
}
