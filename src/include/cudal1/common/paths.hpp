// Where cudal1 finds its worker program and keeps its caches and locks.
#pragma once

#include <filesystem>
#include <string>

namespace cudal1 {

// $CUDAL1_WORKER, else `cudal1-worker` next to the running executable.
std::filesystem::path default_worker_path();

// $CUDAL1_CACHE_DIR, else $XDG_CACHE_HOME/cudal1, else ~/.cache/cudal1.
std::filesystem::path default_cache_dir();

// $CUDAL1_LOCK_DIR, else /tmp/cudal1-locks: shared by every user of the machine, because a GPU
// timing phase must exclude every other one, whoever started it.
std::filesystem::path default_lock_dir();

// A fresh private directory under `parent` (created); the caller removes it.
std::filesystem::path make_private_directory(const std::filesystem::path& parent,
                                             const std::string& prefix);

// `to` made a copy of the folder `from` (whatever `to` held is gone): symbolic links copied as
// links, never followed; regular files with their modification times, so that ninja finds a copied
// build up to date.
void copy_folder_keeping_times(const std::filesystem::path& from, const std::filesystem::path& to);
// The same into the folder `to` as it is (made where missing; nothing in it removed): a folder a
// running worker's view already binds (a ready worker's) must stay the same folder.
void copy_into_folder_keeping_times(const std::filesystem::path& from,
                                    const std::filesystem::path& to);

}  // namespace cudal1
