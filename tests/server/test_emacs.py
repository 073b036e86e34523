"""Emacs drives the real server through eglot with the configuration README.md gives (``editors.readme_config``).
Debian's Emacs and its eglot are what `make test` installs (``tests/server/neovim-setup.sh``): diagnostics arrive, the kinds command answers, ``definition`` on a layer's heading
moves point to its representative, and a lowering writes a bundle that records the file's SHA-256 and shows its
manifest (the README's ``window/showDocument`` handler)."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys

from editors import Workspace, readme_config

#: Waits inside Emacs, in seconds: bounds on a hang, not measurements. Each waits for a state, polling the server's
#: output, so a loaded machine takes longer and still passes.
DRIVER = r"""
(require 'json)
(defvar streamed-test-out (list (cons 'steps nil)))
(defun streamed-test-put (key value) (push (cons key value) streamed-test-out))
(defun streamed-test-finish (failed)
  (when failed (streamed-test-put 'failed failed))
  (with-temp-file streamed-test-report (insert (json-encode streamed-test-out)))
  (kill-emacs (if failed 1 0)))
(defun streamed-test-wait (what seconds pred)
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall pred) (streamed-test-finish (format "timed out waiting for %s" what)))
    (setcdr (assq 'steps streamed-test-out) (cons what (cdr (assq 'steps streamed-test-out))))))
(defun streamed-test-line () (1- (line-number-at-pos)))
(defun streamed-test-at (line)
  (goto-char (point-min)) (forward-line line) (forward-char 3))  ; on the heading's word `Layer`

(setq eglot-connect-timeout 120)  ; a loaded machine starts the server slowly: a bound on a hang, not a measurement
(condition-case err
    (let ((jsonrpc-default-request-timeout 120) (doc (find-file streamed-test-doc)) server uri)
      (run-hooks 'post-command-hook)  ; eglot-ensure connects after the command that visited the file
      (streamed-test-wait "the server" 60 (lambda () (with-current-buffer doc (eglot-current-server))))
      (setq server (with-current-buffer doc (eglot-current-server)) uri (eglot--path-to-uri streamed-test-doc))
      (streamed-test-wait "the diagnostics" 60
                          (lambda () (with-current-buffer doc (flymake-start) (flymake-diagnostics))))
      (streamed-test-put 'diagnostics
                         (vconcat (mapcar (lambda (d) (list (cons 'line (with-current-buffer doc
                                                                          (1- (line-number-at-pos (flymake-diagnostic-beg d)))))
                                                            (cons 'message (flymake-diagnostic-text d))
                                                            (cons 'type (symbol-name (flymake-diagnostic-type d)))))
                                          (with-current-buffer doc (flymake-diagnostics)))))
      (streamed-test-put 'kinds (eglot-execute-command server "streamed.showKinds" (vector (list :uri uri))))
      (switch-to-buffer doc)
      (streamed-test-at streamed-test-layer3)
      (call-interactively #'xref-find-definitions)
      (streamed-test-wait "definition to move point" 20 (lambda () (= (streamed-test-line) streamed-test-layer0)))
      (streamed-test-put 'definition-went-to (streamed-test-line))
      (streamed-test-put 'lowered (eglot-execute-command server "streamed.lowerBundle" (vector (list :uri uri))))
      (streamed-test-wait "the manifest shown" 20
                          (lambda () (equal (buffer-file-name (window-buffer (selected-window))) streamed-test-manifest)))
      (streamed-test-finish nil))
  (error (streamed-test-finish (format "%S" err))))
"""


def test_emacs_with_the_readme_configuration_gets_diagnostics_kinds_go_to_representative_and_a_bundle_shown(tmp_path):
    emacs = shutil.which("emacs")
    assert emacs, "no `emacs`: `make test` installs Debian's (tests/server/neovim-setup.sh), or `apt-get install emacs-nox elpa-eglot`"
    ws = Workspace.make(tmp_path)
    config, driver = tmp_path / "streamed.el", tmp_path / "driver.el"
    config.write_text(readme_config("Emacs", "elisp", sys.executable))
    constants = {"report": str(ws.report), "doc": str(ws.doc), "manifest": str(ws.manifest),
                 "layer0": ws.heading("## Layer 0"), "layer3": ws.heading("## Layer 3")}
    # A JSON string or number is an Emacs Lisp one (backslashes and quotes escaped alike).
    driver.write_text("".join(f"(defvar streamed-test-{k} {json.dumps(v)})\n" for k, v in constants.items()) + DRIVER)
    run, got = ws.run([emacs, "--batch", "--no-init-file", "-l", str(config), "-l", str(driver)])
    assert run.returncode == 0 and "failed" not in got, (got, run.stdout[-2000:], run.stderr[-3000:])

    # One diagnostic: the divergence of layer 4, a warning on its epsilon's line.
    (d,) = got["diagnostics"]
    assert d["line"] == ws.line_with("epsilon 0.001.")
    assert d["message"].startswith("streamed [divergence]: layer 4 is not one program with layer 0 (attention)")
    assert d["type"] == "eglot-warning"
    # The kinds command: layer 4 its own kind, the other five one kind whose first layer is layer 0.
    assert sorted((k["representative"], k["layers"]) for k in got["kinds"]) == [(0, [0, 1, 2, 3, 5]), (4, [4])]
    # Definition on layer 3's heading moved point to layer 0's; the lowering wrote the bundle of the saved text.
    assert got["definition-went-to"] == ws.heading("## Layer 0")
    assert got["lowered"]["manifest"] == str(ws.manifest) and got["lowered"]["kinds"] == 2
    data = json.loads(ws.manifest.read_text())
    assert data["document"] == {"name": "model.lgm", "sha256": hashlib.sha256(ws.doc.read_bytes()).hexdigest()}
    assert len(data["layers"]) == 6
