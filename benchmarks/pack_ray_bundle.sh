#!/usr/bin/env bash
# Packs Ray and its dependencies (wheels for Python 3.12 on linux x86_64) for a machine without
# network, such as the GPU machine: .dev-ray/ray-<V>.tar.xz.part-NN (xz, parts of at most 48
# MiB; 58 MiB in all) and .dev-ray/setup.sh.
# Usage, from the project root:     bash benchmarks/pack_ray_bundle.sh
# Then on the GPU machine, in ONE call that carries both parts and setup.sh (with a working
# tree of a few MB they fit the 64 MiB a call may carry; a part carried in an earlier call is
# gone once a later call carries into .dev-ray/ again), run
#     bash .dev-ray/setup.sh        # joins, unpacks into .dev-ray/site (kept), checks import ray
# and in the calls that use it, after sourcing the MLX bundle's .dev/setup.sh:
#     export PYTHONPATH=$PWD/.dev-ray/site:$PYTHONPATH
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.dev-ray/' "$exclude" 2>/dev/null || echo '/.dev-ray/' >> "$exclude"
mkdir -p .dev-ray
V=${RAY_VERSION:-2.60.0}
if ! ls .dev-ray/ray-$V.tar.xz.part-* > /dev/null 2>&1; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux2014_x86_64 -d "$tmp/wheels" "ray==$V"
  ls "$tmp/wheels"
  mkdir "$tmp/site"
  # Unzip keeping the files' modes: Ray starts its own executables (gcs_server, raylet), and
  # `python -m zipfile -e` would drop their execute bits.
  python3 - "$tmp/site" "$tmp"/wheels/*.whl <<'PY'
import os, sys, zipfile
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            path = archive.extract(info, sys.argv[1])
            mode = info.external_attr >> 16
            if mode & 0o111:
                os.chmod(path, mode & 0o777)
PY
  # Ray's dashboard and its pre-built web client are not needed to run tasks and actors.
  rm -rf "$tmp/site/ray/dashboard/client/build"
  tar -C "$tmp/site" -cf - . | xz -9e -T2 | split -b 48m -d - ".dev-ray/ray-$V.tar.xz.part-"
  rm -rf "$tmp"
fi
cat > .dev-ray/setup.sh <<SH
# Run on the GPU machine from the project root once every part is there: unpacks Ray into
# .dev-ray/site (kept between calls) unless it is there already, then checks it imports.
set -euo pipefail
if [ ! -f .dev-ray/site/.complete-$V ]; then
  rm -rf .dev-ray/site && mkdir -p .dev-ray/site
  cat .dev-ray/ray-$V.tar.xz.part-* | xz -d | tar -C .dev-ray/site -xf -
  touch .dev-ray/site/.complete-$V
fi
PYTHONPATH=\$PWD/.dev-ray/site:\${PYTHONPATH:-} python3 -c "import ray; print('ray', ray.__version__, ray.__file__)"
SH
ls -l .dev-ray
du -sh .dev-ray
