#define _GNU_SOURCE
#include <stdio.h>
#include <sched.h>
#include <sys/sem.h>
#include <sys/ipc.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <sys/syscall.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
#define N 200000
int main(){
  int id=semget(IPC_PRIVATE,8,0600); union{int v;} a; 
  semctl(id,0,SETVAL,4); semctl(id,4,SETVAL,1);
  char path[64]; sprintf(path,"/proc/self/task/%ld/schedstat",syscall(SYS_gettid));
  int fd=open(path,O_RDONLY); char buf[128];
  cpu_set_t all,one; sched_getaffinity(0,sizeof all,&all); CPU_ZERO(&one); CPU_SET(sched_getcpu(),&one);
  double t;
  t=now(); for(int i=0;i<N;i++) getppid(); printf("getppid        %6.0f ns\n",(now()-t)/N);
  t=now(); for(int i=0;i<N;i++){struct sembuf o[2]={{0,-1,IPC_NOWAIT|SEM_UNDO}}; semop(id,o,1); o[0].sem_op=1; semop(id,o,1);} printf("semop(x2)/2    %6.0f ns\n",(now()-t)/N/2);
  t=now(); for(int i=0;i<N;i++){struct sembuf o[3]={{3,0,IPC_NOWAIT},{0,-1,IPC_NOWAIT|SEM_UNDO},{4,-1,IPC_NOWAIT|SEM_UNDO}}; semop(id,o,3); struct sembuf p[4]={{4,0,IPC_NOWAIT},{4,1,SEM_UNDO},{0,1,SEM_UNDO},{3,0,IPC_NOWAIT}}; semop(id,p,4);} printf("semop3+semop4/2 %6.0f ns\n",(now()-t)/N/2);
  t=now(); for(int i=0;i<N;i++) semctl(id,3,GETVAL); printf("semctl GETVAL  %6.0f ns\n",(now()-t)/N);
  t=now(); for(int i=0;i<N;i++) semctl(id,0,GETNCNT); printf("semctl GETNCNT %6.0f ns\n",(now()-t)/N);
  t=now(); for(int i=0;i<N;i++) pread(fd,buf,sizeof buf,0); printf("pread schedstat %6.0f ns\n",(now()-t)/N);
  t=now(); for(int i=0;i<N;i++){cpu_set_t s; sched_getaffinity(0,sizeof s,&s);} printf("getaffinity    %6.0f ns\n",(now()-t)/N);
  t=now(); for(int i=0;i<N;i++){sched_setaffinity(0,sizeof one,&one); sched_setaffinity(0,sizeof all,&all);} printf("setaffinity(x2)/2 %6.0f ns\n",(now()-t)/N/2);
  t=now(); for(int i=0;i<N;i++) sched_getcpu(); printf("sched_getcpu   %6.0f ns\n",(now()-t)/N);
  semctl(id,0,IPC_RMID); return 0;}
