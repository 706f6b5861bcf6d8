//! Unit tests of the private folders: the cache directory's rules, refused folders and names,
//! fresh temporary folders, and `write_file`.

use super::*;
use std::os::unix::fs::{symlink, PermissionsExt as _};

/// A fresh private folder (from [`fresh_temp`]) removed when dropped, its path resolved.
struct TempRoot(PathBuf);

impl TempRoot {
    /// `None` (with the reason printed) where the system's temporary folder is not one the
    /// cache rules accept (e.g. `TMPDIR` inside another user's folder): the tests below
    /// would then fail for that reason, not for the one they test.
    fn new(test: &str) -> Option<TempRoot> {
        let made = fresh_temp("cotenant-private-dir-test").expect("mkdtemp in the temp folder");
        let root = TempRoot(fs::canonicalize(&made).expect("resolving a fresh folder"));
        match check_chain(&root.0, &root.0, true) {
            Ok(()) => Some(root),
            Err(e) => {
                eprintln!("{test}: SKIPPED: the temporary folder is not trusted: {e:#}");
                None
            }
        }
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.0) {
            eprintln!("cannot remove {}: {e}", self.0.display());
        }
    }
}

fn mode_of(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

#[test]
fn the_cache_directory_is_xdg_cache_home_then_home() {
    let os = |s: &'static str| Some(OsStr::new(s));
    assert_eq!(user_cache_root(os("/x/cache"), os("/home/u")), Some(PathBuf::from("/x/cache")));
    assert_eq!(user_cache_root(os("relative"), os("/home/u")), Some(PathBuf::from("/home/u/.cache")));
    assert_eq!(user_cache_root(None, os("/home/u")), Some(PathBuf::from("/home/u/.cache")));
    assert_eq!(user_cache_root(os(""), os("home")), None, "relative or empty: no cache directory");
    assert_eq!(user_cache_root(None, None), None);
}

#[test]
fn cache_folders_are_made_private_and_reused() {
    const TEST: &str = "cache_folders_are_made_private_and_reused";
    let Some(root) = TempRoot::new(TEST) else { return };
    let missing = root.0.join("missing");
    let cache = missing.join("cache");
    let dir = cache_dir_under(&cache, "lab-go").unwrap();
    let app = cache.join("cotenant");
    assert_eq!(dir, app.join("lab-go"));
    let made: [&Path; 4] = [&missing, &cache, &app, &dir];
    for made in made {
        let meta = fs::symlink_metadata(made).unwrap();
        assert!(meta.is_dir(), "{}", made.display());
        assert_eq!(meta.uid(), effective_uid(), "{}", made.display());
        assert_eq!(mode_of(made) & 0o077, 0, "{} has mode {:04o}", made.display(), mode_of(made));
    }
    fs::write(dir.join("kept"), "built").unwrap();
    assert_eq!(cache_dir_under(&cache, "lab-go").unwrap(), dir, "the same folder again");
    assert!(dir.join("kept").exists(), "a reused folder keeps its contents (the build cache)");
}

#[test]
fn names_that_are_not_one_folder_are_refused() {
    const TEST: &str = "names_that_are_not_one_folder_are_refused";
    let Some(root) = TempRoot::new(TEST) else { return };
    for name in ["", "..", ".", "a/b", "/abs", "a/"] {
        let e = cache_dir_under(&root.0, name).unwrap_err();
        assert!(e.to_string().contains("is not a single folder name"), "{name:?}: {e:#}");
        assert!(fresh_temp(name).is_err(), "{name:?}");
    }
    assert!(!root.0.join("cotenant").exists(), "nothing was created for a bad name");
}

#[test]
fn a_symlinked_folder_is_refused() {
    const TEST: &str = "a_symlinked_folder_is_refused";
    let Some(root) = TempRoot::new(TEST) else { return };
    let elsewhere = root.0.join("elsewhere");
    ensure_private(&elsewhere).unwrap();
    // The cotenant level: a link to a folder of our own is still refused.
    symlink(&elsewhere, root.0.join("cotenant")).unwrap();
    let e = cache_dir_under(&root.0, "lab-go").unwrap_err();
    let expected = format!("{} is a symbolic link", root.0.join("cotenant").display());
    assert!(e.to_string().starts_with(&expected), "{e:#}");
    assert!(!elsewhere.join("lab-go").exists(), "the link was followed");

    // The <name> level.
    fs::remove_file(root.0.join("cotenant")).unwrap();
    ensure_private(&root.0.join("cotenant")).unwrap();
    symlink(&elsewhere, root.0.join("cotenant").join("lab-go")).unwrap();
    let e = cache_dir_under(&root.0, "lab-go").unwrap_err();
    assert!(e.to_string().contains("lab-go is a symbolic link"), "{e:#}");
    // A dangling one too (mkdir says "exists" for it).
    fs::remove_file(root.0.join("cotenant").join("lab-go")).unwrap();
    symlink(root.0.join("nowhere"), root.0.join("cotenant").join("lab-go")).unwrap();
    let e = cache_dir_under(&root.0, "lab-go").unwrap_err();
    assert!(e.to_string().contains("lab-go is a symbolic link"), "{e:#}");
    assert!(!root.0.join("nowhere").exists(), "the dangling link was followed");
}

#[test]
fn a_folder_others_can_write_is_refused_and_left_alone() {
    const TEST: &str = "a_folder_others_can_write_is_refused_and_left_alone";
    let Some(root) = TempRoot::new(TEST) else { return };
    let app = root.0.join("cotenant");
    fs::create_dir(&app).unwrap();
    for (mode, who) in [(0o777, "others"), (0o770, "its group"), (0o1777, "others")] {
        fs::set_permissions(&app, fs::Permissions::from_mode(mode)).unwrap();
        let e = cache_dir_under(&root.0, "lab-probes").unwrap_err();
        let expected = format!("{} is writable by {who} (mode {mode:04o})", app.display());
        assert!(e.to_string().starts_with(&expected), "{e:#}");
        assert_eq!(mode_of(&app), mode, "the folder's mode was changed");
        assert!(!app.join("lab-probes").exists());
    }
    // The cache directory itself, even sticky.
    fs::set_permissions(&app, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(&root.0, fs::Permissions::from_mode(0o1777)).unwrap();
    let e = cache_dir_under(&root.0, "lab-probes").unwrap_err();
    let expected = format!("{} is writable by others (mode 1777)", root.0.display());
    assert!(e.to_string().starts_with(&expected), "{e:#}");
    assert!(e.to_string().contains("set XDG_CACHE_HOME"), "{e:#}");
    fs::set_permissions(&root.0, fs::Permissions::from_mode(0o700)).unwrap();
    assert!(cache_dir_under(&root.0, "lab-probes").is_ok(), "and accepted once private");
}

#[test]
fn a_folder_another_user_owns_is_refused() {
    const TEST: &str = "a_folder_another_user_owns_is_refused";
    const NOBODY: u32 = 65534;
    if effective_uid() != 0 {
        return eprintln!("{TEST}: SKIPPED: giving a folder to another user (chown) needs root");
    }
    let Some(root) = TempRoot::new(TEST) else { return };
    let cache = root.0.join("cache");
    let app = cache.join("cotenant");
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&app).unwrap();
    std::os::unix::fs::chown(&app, Some(NOBODY), Some(NOBODY)).unwrap();
    let e = cache_dir_under(&cache, "lab-go").unwrap_err();
    let expected = format!("{} is owned by uid {NOBODY}, not 0", app.display());
    assert!(e.to_string().starts_with(&expected), "{e:#}");
    assert_eq!(fs::symlink_metadata(&app).unwrap().uid(), NOBODY, "the folder was taken over");
    assert!(!app.join("lab-go").exists());

    // The cache directory itself (another user's $HOME/.cache under sudo -E).
    fs::remove_dir(&app).unwrap();
    std::os::unix::fs::chown(&cache, Some(NOBODY), Some(NOBODY)).unwrap();
    let e = cache_dir_under(&cache, "lab-go").unwrap_err();
    let expected = format!("{} is owned by uid {NOBODY}, not 0", cache.display());
    assert!(e.to_string().starts_with(&expected), "{e:#}");
    assert!(!app.exists(), "nothing was created in it");
}

#[test]
fn a_cache_directory_others_can_write_gives_a_fresh_folder_instead() {
    const TEST: &str = "a_cache_directory_others_can_write_gives_a_fresh_folder_instead";
    let Some(root) = TempRoot::new(TEST) else { return };
    let cache = root.0.join("cache");
    fs::create_dir(&cache).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(!is_trusted(&cache) && is_trusted(&root.0) && !is_trusted(&root.0.join("missing")));
    let no_cache_directory = cache_dir_from(None, "lab-go").unwrap();
    for dir in [cache_dir_from(Some(cache.clone()), "lab-go").unwrap(), no_cache_directory] {
        assert!(!dir.starts_with(&root.0), "{} is in the untrusted folder", dir.display());
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("cotenant-lab-go-"), "{}", dir.display());
        assert_eq!(mode_of(&dir) & 0o077, 0, "{} has mode {:04o}", dir.display(), mode_of(&dir));
        fs::remove_dir(&dir).unwrap();
    }
    assert_eq!(fs::read_dir(&cache).unwrap().count(), 0, "something was made in the untrusted folder");
    // A missing cache directory under a folder others can write is not made at all.
    let dir = cache_dir_from(Some(cache.join("xdg")), "lab-go").unwrap();
    assert!(!cache.join("xdg").exists(), "the cache directory was made in an untrusted folder");
    fs::remove_dir(&dir).unwrap();
    // A trusted one is used, and kept.
    let dir = cache_dir_from(Some(root.0.join("ok")), "lab-go").unwrap();
    assert_eq!(dir, root.0.join("ok").join("cotenant").join("lab-go"));
}

#[test]
fn only_a_fallback_folder_is_recorded_for_removal_when_the_lab_ends() {
    const TEST: &str = "only_a_fallback_folder_is_recorded_for_removal_when_the_lab_ends";
    // Checked, not removed, here: removing every recorded folder would race with the other
    // tests that make one.
    let recorded = |dir: &Path| crate::cleanup::recorded_temp_folders().contains(&dir.to_path_buf());
    let fallback = cache_dir_from(None, "lab-test-recorded").unwrap();
    assert!(recorded(&fallback), "{} would be left behind", fallback.display());
    fs::remove_dir(&fallback).unwrap();
    let Some(root) = TempRoot::new(TEST) else { return };
    let kept = cache_dir_from(Some(root.0.join("cache")), "lab-test-recorded").unwrap();
    assert!(!recorded(&kept), "{} is a cache kept between runs", kept.display());
}

#[test]
fn fresh_temporary_folders_are_new_and_private() {
    let a = fresh_temp("cotenant-private-dir-test").unwrap();
    let b = fresh_temp("cotenant-private-dir-test").unwrap();
    assert_ne!(a, b);
    for dir in [&a, &b] {
        assert!(dir.file_name().unwrap().to_string_lossy().starts_with("cotenant-private-dir-test-"));
        assert_eq!(mode_of(dir) & 0o077, 0, "{} has mode {:04o}", dir.display(), mode_of(dir));
        assert_eq!(fs::symlink_metadata(dir).unwrap().uid(), effective_uid());
        fs::remove_dir(dir).unwrap();
    }
}

#[test]
fn a_symlink_at_the_file_is_replaced_and_its_target_untouched() {
    const TEST: &str = "a_symlink_at_the_file_is_replaced_and_its_target_untouched";
    let Some(root) = TempRoot::new(TEST) else { return };
    let target = root.0.join("precious");
    fs::write(&target, "keep me").unwrap();
    let path = root.0.join("probe.cpp");
    symlink(&target, &path).unwrap();
    write_file(&path, b"int main() {}", 0o644).unwrap();
    assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file(), "still a link");
    assert_eq!(fs::read_to_string(&path).unwrap(), "int main() {}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "keep me", "written through the link");
    let mut names: Vec<String> =
        fs::read_dir(&root.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    assert_eq!(names, ["precious", "probe.cpp"], "no temporary file left behind");
}

#[test]
fn write_file_refuses_a_symlinked_folder() {
    const TEST: &str = "write_file_refuses_a_symlinked_folder";
    let Some(root) = TempRoot::new(TEST) else { return };
    let real = root.0.join("real");
    fs::create_dir(&real).unwrap();
    symlink(&real, root.0.join("link")).unwrap();
    let e = write_file(&root.0.join("link").join("report.md"), b"x", 0o644).unwrap_err();
    let expected = format!("{} is a symbolic link", root.0.join("link").display());
    assert!(e.to_string().starts_with(&expected), "{e:#}");
    assert_eq!(fs::read_dir(&real).unwrap().count(), 0, "written through the folder link");
}

#[test]
fn write_file_sets_the_mode_asked_whatever_the_umask() {
    const TEST: &str = "write_file_sets_the_mode_asked_whatever_the_umask";
    let Some(root) = TempRoot::new(TEST) else { return };
    let path = root.0.join("go.mod");
    for mode in [0o640, 0o755, 0o600, 0o666] {
        write_file(&path, format!("mode {mode:o}").as_bytes(), mode).unwrap();
        assert_eq!(mode_of(&path), mode);
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("mode {mode:o}"));
    }
    let folder = root.0.join("probe-go");
    fs::create_dir(&folder).unwrap();
    let e = write_file(&folder, b"x", 0o644).unwrap_err();
    let expected = format!("writing {}", folder.display());
    assert!(e.to_string().starts_with(&expected), "a folder in the way is an error: {e:#}");
    assert!(fs::symlink_metadata(&folder).unwrap().is_dir());
}
