# The environments locked from PyPI alone (pypi-torch-2.10, pypi-torch-2.4): Ubuntu's Python on a CUDA base, the
# lock's wheels (torch brings its CUDA libraries as nvidia-* wheels), no FA3 build: the records they serve take
# FA3 from the kernels hub, which repro answers with its stand-in at run time (pipeline/runs/hub_standin/), or
# use no FA3 at all (2024).
#
#     repro env build --env pypi-torch-2.10 [--wheelhouse DIR]
#
# Its install and runtime stages are docker/Dockerfile's and docker/test.Dockerfile's, line for line
# (tests/test_env_dockerfile.py checks); `repro env build` passes every ARG below from the lock.

# Digest seen in public build files in 2026, NOT verified from the machine that wrote this (no registry access):
# a pull by digest either yields exactly these bytes or fails.
ARG RUNTIME_IMAGE=nvidia/cuda:12.8.1-devel-ubuntu24.04@sha256:4b9ed5fa8361736996499f64ecebf25d4ec37ff56e4d11323ccde10aa36e0c43
# Ubuntu's archive as it was on one day: every apt package version is fixed by this timestamp.
ARG APT_SNAPSHOT=20260717T000000Z
ARG PYTHON_VERSION=3.12.3
ARG SOURCE_DATE_EPOCH=0

# ---- python: the runtime base with Ubuntu's own Python (24.04's is the 3.12.3 the 2026 logs print)
FROM ${RUNTIME_IMAGE} AS python
ARG APT_SNAPSHOT
ARG PYTHON_VERSION
# Ubuntu 22.04 lists its archive in sources.list, 24.04 in sources.list.d/ubuntu.sources: both point at the snapshot.
RUN rm -f /etc/apt/sources.list.d/cuda*.list \
 && for f in /etc/apt/sources.list /etc/apt/sources.list.d/ubuntu.sources; do if [ -f "$f" ]; then \
      sed -i -E "s#https?://(archive|security)\.ubuntu\.com/ubuntu/?#http://snapshot.ubuntu.com/ubuntu/${APT_SNAPSHOT}#" "$f"; fi; done \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -c "import platform, sys; v = platform.python_version(); sys.exit(0 if v == '${PYTHON_VERSION}' else f'python {v} is not the pinned ${PYTHON_VERSION}')"

# ---- install: the lock into /opt/venv; wheels stay in this stage, only /export moves on
FROM python AS install
ARG SOURCE_DATE_EPOCH
COPY requirements/ /tmp/requirements/
COPY wheelhouse/ /tmp/wheelhouse/
COPY repro-environment.json /etc/repro/environment.json
# SOURCE_DATE_EPOCH makes .pyc files hash-checked (no embedded mtimes). Everything the runtime gets is
# gathered under /export with one mtime, directories included, so its layer depends on content only.
RUN python3 -m venv --without-pip /opt/venv \
 && PIP_WHEEL=$(ls /usr/share/python-wheels/pip-*.whl) \
 && export SOURCE_DATE_EPOCH \
 && /opt/venv/bin/python "$PIP_WHEEL/pip" install --no-cache-dir --no-index --no-deps --require-hashes -r /tmp/requirements/runtime.txt \
 && if [ -f /tmp/fa3/fa3.txt ]; then /opt/venv/bin/python "$PIP_WHEEL/pip" install --no-cache-dir --no-index --no-deps --require-hashes -r /tmp/fa3/fa3.txt && cp /tmp/fa3/fa3.json /etc/repro/fa3.json; fi \
 && mkdir -p /export/opt /export/etc /export/workspace \
 && mv /opt/venv /export/opt/venv && cp -a /etc/repro /export/etc/repro \
 && find /export -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +

# ---- runtime: the python stage plus one layer: /opt/venv, /etc/repro, /workspace
FROM python AS runtime
COPY --from=install /export/ /
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /workspace
CMD ["python"]
