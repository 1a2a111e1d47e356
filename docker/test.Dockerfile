# The small twin of docker/Dockerfile that the tests build (environment "test-bookworm"): a Debian
# bookworm base made from Debian packages (tests/docker_base.py) instead of CUDA, no FA3 builder stage.
#
#     repro env build --env test-bookworm --wheelhouse DIR
#
# Its install and runtime stages are docker/Dockerfile's, line for line (tests/test_env_dockerfile.py
# checks), so the tests exercise the real image's build path: same build function, build args, labels,
# lock and hash-checked pip install.

# A local image id (the sha256 of its config): as much a content pin as a registry digest.
ARG RUNTIME_IMAGE
ARG PYTHON_VERSION=3.11.2
ARG SOURCE_DATE_EPOCH=0

# ---- python: bookworm's python3 is already in the base (debootstrap --include=python3,python3-venv)
FROM ${RUNTIME_IMAGE} AS python
ARG PYTHON_VERSION
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
