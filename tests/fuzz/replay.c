/* SPDX-License-Identifier: MIT */
/*
 * replay.c - main() for the make-check build of a fuzz target: feeds every
 * file of the target's seed corpus and regressions directory to
 * LLVMFuzzerTestOneInput, in name order, with the normal compiler (and the
 * sanitizers when configured with --enable-sanitizers).
 *
 *   fuzz_replay_<name> [DIR|FILE]...
 * Without arguments it replays $LH_SRCDIR/tests/fuzz/corpus/<name>/ (must
 * exist and hold at least one file) and $LH_SRCDIR/tests/fuzz/regressions/<name>/
 * (optional), <name> being FUZZ_NAME given at compile time.
 * Exit 0 when every input ran; 99 on a setup error; a crash is a crash.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#pragma weak LLVMFuzzerInitialize
#pragma weak fuzz_cleanup

#ifndef FUZZ_NAME
#error "FUZZ_NAME must name the target (-DFUZZ_NAME=\"gateway\")"
#endif

/* largest input replayed (the seeds are tiny; run.sh uses -max_len) */
#define REPLAY_MAX (1024 * 1024)

/* read_file - whole file into a malloc'd buffer of exactly its size (so the
 * sanitizers see reads past the end). Returns 0 or -errno. */
static int read_file(const char *path, uint8_t **ret_buf, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size > REPLAY_MAX) {
		int r = st.st_size > REPLAY_MAX ? -EFBIG : -errno;
		close(fd);
		return r;
	}
	size_t len = (size_t)st.st_size;
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int r = n < 0 ? -errno : -EIO;
			free(buf);
			close(fd);
			return r;
		}
		got += (size_t)n;
	}
	close(fd);
	*ret_buf = buf;
	*ret_len = len;
	return 0;
}

static int run_file(const char *path)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int r = read_file(path, &buf, &len);
	if (r < 0) {
		fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(-r));
		return r;
	}
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* run_path - a file, or every regular file of a directory (name order,
 * dot files skipped). Adds the number of inputs run to *count. */
static int run_path(const char *path, bool optional, size_t *count)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		if (optional && errno == ENOENT)
			return 0;
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		int r = run_file(path);
		if (r == 0)
			(*count)++;
		return r;
	}
	struct dirent **names = NULL;
	int n = scandir(path, &names, NULL, NULL);
	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	char **files = calloc((size_t)n + 1, sizeof(*files));
	size_t nf = 0;
	int r = files ? 0 : -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (r == 0 && names[i]->d_name[0] != '.') {
			size_t l = strlen(path) + strlen(names[i]->d_name) + 2;
			files[nf] = malloc(l);
			if (!files[nf])
				r = -ENOMEM;
			else
				snprintf(files[nf++], l, "%s/%s", path, names[i]->d_name);
		}
		free(names[i]);
	}
	free(names);
	if (r == 0)
		qsort(files, nf, sizeof(*files), cmp_names);
	for (size_t i = 0; r == 0 && i < nf; i++) {
		struct stat fst;
		if (stat(files[i], &fst) == 0 && S_ISREG(fst.st_mode)) {
			r = run_file(files[i]);
			if (r == 0)
				(*count)++;
		}
	}
	for (size_t i = 0; i < nf; i++)
		free(files[i]);
	free(files);
	return r;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	int r = 0;
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc > 1) {
		for (int i = 1; r == 0 && i < argc; i++)
			r = run_path(argv[i], false, &count);
	} else {
		const char *src = getenv("LH_SRCDIR");
		if (!src || !*src)
			src = ".";
		char corpus[4096], regress[4096];
		snprintf(corpus, sizeof(corpus), "%s/tests/fuzz/corpus/%s", src, FUZZ_NAME);
		snprintf(regress, sizeof(regress), "%s/tests/fuzz/regressions/%s", src, FUZZ_NAME);
		r = run_path(corpus, false, &count);
		if (r == 0 && count == 0) {
			fprintf(stderr, "replay: %s holds no input\n", corpus);
			r = -ENOENT;
		}
		if (r == 0)
			r = run_path(regress, true, &count);
	}
	if (fuzz_cleanup)
		fuzz_cleanup();
	if (r < 0)
		return 99;
	printf("replay %s: %zu inputs, no crash\n", FUZZ_NAME, count);
	return 0;
}
