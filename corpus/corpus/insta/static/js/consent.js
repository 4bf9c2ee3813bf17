/*! consent: the cookie banner, built by script */
(function(){function show(){if(document.cookie.indexOf('consent=')>=0)return;var d=document.createElement('div');d.className='cookie-banner';
d.innerHTML='<h2>Allow the use of cookies on this browser?</h2><p>We use cookies to help provide, personalise and improve content, to measure ads and to provide a safer experience.</p>';
['Allow essential and optional cookies','Decline optional cookies'].forEach(function(t,i){var b=document.createElement('button');b.textContent=t;
b.onclick=function(){document.cookie='consent='+(i?'essential':'all')+'; path=/; max-age=31536000';d.remove()};d.appendChild(b)});
document.body.appendChild(d);document.cookie='csrftoken=OVBDbeveL_Ti; path=/';document.cookie='mid=ewoafZ; path=/'}
if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',show)}else{show()}})();
