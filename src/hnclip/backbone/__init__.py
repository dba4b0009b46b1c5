"""The backbone every run fine-tunes: a released model folder (:mod:`.released`), and the release of one."""
